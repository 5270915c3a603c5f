"""VRAM fit: per worker and model, weights + KV cache at full slots against the profile's memory (warns).

weights = `models.<id>.size_gib`; KV cache = slots x context x `kv_bytes_per_token`, where slots is the
model's slot limit on the worker and context its limit there (`context_limits`, else the worker's or
the plan's default): ``placement.footprint_of``. A model without both facts, or a worker without known
memory (`memory_gib`, else its profile's), is not checked.
"""

from __future__ import annotations

from interlock.compiler.context import CompileContext, Worker
from interlock.compiler.homes import GIB, footprint_of


def vram(ctx: CompileContext) -> None:
    """Warn where a model at its slot count cannot fit the worker's memory; say what would."""
    models_by_provider: dict[str, set[str]] = {}
    for links in ctx.expanded.values():
        for link in links:
            provider, _, model = link.candidate.partition("/")
            models_by_provider.setdefault(provider, set()).add(model)
    for worker in ctx.workers.values():
        memory = worker.memory()
        if memory is None:
            continue
        for model in sorted(models_by_provider.get(worker.provider, ())):
            _check(ctx, worker, model, memory)


def _check(ctx: CompileContext, worker: Worker, model: str, memory: float) -> None:
    foot = footprint_of(ctx, worker, model)
    if foot is None or foot.kv is None or foot.context is None:
        return
    weights, kv, slots, context = foot.weights, foot.kv, foot.slots, foot.context
    per_token = ctx.models[f"{worker.provider}/{model}"].facts.kv_bytes_per_token
    assert per_token is not None  # a footprint with a KV part has it
    if weights + kv <= memory:
        return
    free = (memory - weights) * GIB
    if free <= 0:
        advice = f"the weights alone ({weights:g} GiB) exceed it: use a smaller quantization or worker"
    else:
        fit_slots = int(free // (context * per_token))
        fit_context = int(free // (slots * per_token))
        options = []
        if fit_slots >= 1:
            options.append(f"{fit_slots} slot{'s' if fit_slots != 1 else ''} at {context} tokens")
        if fit_context >= 1:
            options.append(f"{slots} slot{'s' if slots != 1 else ''} at {fit_context} tokens")
        advice = "would fit: " + " or ".join(options) if options else "nothing useful fits"
    index = worker.entry.path[-1]
    ctx.sink.add(
        "IL705",
        ctx.span_of(worker.entry, "name"),
        f"`{model}` on worker `{worker.name}` needs about {weights + kv:.1f} GiB "
        f"({weights:g} GiB weights + {slots} x {context} tokens of KV cache = {kv:.1f} GiB), "
        f"more than its {memory:g} GiB",
        path=f"providers.{worker.provider}.workers[{index}]",
        value=model,
        hint=advice,
    )
