"""The compiler: YAML sources -> checked, frozen routing plan.

``compile_config`` runs the loader, every pass in ``passes.PASSES`` and the emitter, and returns the
context (plan and diagnostics). It raises nothing for bad input: callers look at the diagnostics.
"""

from __future__ import annotations

from interlock.common.gc_pause import collector_paused
from interlock.compiler.codes import Severity
from interlock.compiler.context import CompileContext, CompileOptions
from interlock.compiler.diagnostics import CompileError, Diagnostic, DiagnosticSink
from interlock.compiler.emit import emit
from interlock.compiler.loader import load_sources
from interlock.compiler.passes import PASSES

__all__ = ["CompileContext", "CompileError", "CompileOptions", "Diagnostic", "Severity", "compile_config"]


def compile_config(path: str, options: CompileOptions | None = None) -> CompileContext:
    """Compile ``path``; ``ctx.plan`` is set when there are no errors, ``ctx.sink`` holds diagnostics."""
    options = options or CompileOptions()
    # The compiler allocates millions of small, acyclic objects for a large config; the cyclic
    # collector's repeated full scans of them cost as much as the compile itself (bench/compile_bench.py).
    with collector_paused():
        sink = DiagnosticSink()
        sources = load_sources(path, sink, options.reader, options.limits)
        ctx = CompileContext(sources=sources, sink=sink, options=options)
        if sources.main is None or sources.main.data is None:
            return ctx
        for run in PASSES:
            run(ctx)
        if not sink.errors:
            ctx.plan = emit(ctx)
        return ctx
