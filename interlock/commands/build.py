"""`compile`, `lint`, `explain` and `schema`: the compiler's commands.

With ``--format json`` the stream that carries diagnostics (stderr for ``compile``, whose stdout may be the
plan; stdout for ``lint``) holds exactly one JSON document, the diagnostics array (``[]`` when clean), and
no text line is mixed into any stream: the status lines (``wrote ...``, ``no plan written``, ``... is up
to date``/``stale``, the scan's file count) are left out, and the exit code (0/1/2) says the outcome.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from typing import Any

from interlock.commands.files import OutputError, read_committed, write_atomically, written
from interlock.commands.options import add_source_options, compile_options, read_plan
from interlock.commands.serve import is_config
from interlock.commands.whatif import add_scenario_options
from interlock.compiler import CompileContext, compile_config
from interlock.compiler.diagnostics import did_you_mean
from interlock.compiler.explain import explain
from interlock.compiler.reading import source_problem
from interlock.compiler.report import FORMATS, render, summary
from interlock.schema.canonical import canonical_json
from interlock.schema.config import SourceFile
from interlock.schema.plan import RoutingPlan

MAX_DIFF_LINES = 60


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("compile", help="compile a configuration into a routing plan")
    p.add_argument("config", help="the main YAML file")
    out = p.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", help="write the plan here (default: standard output)")
    out.add_argument("--check", metavar="PLAN", help="fail when PLAN is not what CONFIG compiles to")
    _common(p)
    p.set_defaults(handler=run_compile)

    p = subparsers.add_parser("lint", help="check a configuration; print every diagnostic")
    p.add_argument("config")
    p.add_argument("--strict", action="store_true", help="fail on warnings too")
    p.add_argument("--scan", nargs="+", metavar="PATH", help="also report hard-coded models under PATHs")
    _common(p)
    p.set_defaults(handler=run_lint)

    p = subparsers.add_parser("explain", help="show how an alias expands and what each candidate supports")
    p.add_argument("config", metavar="CONFIG_OR_PLAN")
    p.add_argument("alias")
    add_scenario_options(p)
    add_source_options(p)
    p.set_defaults(handler=run_explain)

    p = subparsers.add_parser("schema", help="write the JSON Schemas of the configuration and the plan")
    p.add_argument("-o", "--output", default="schema", help="folder (default: schema/)")
    p.add_argument("--check", action="store_true", help="fail when the files in the folder are stale")
    p.set_defaults(handler=run_schema)


def _common(p: argparse.ArgumentParser) -> None:
    add_source_options(p)
    p.add_argument("--format", choices=FORMATS, default="text", help="diagnostics format")
    p.add_argument(
        "--require-env", action="store_true", help="fail when a referenced credential variable is unset"
    )


def _compile(args: argparse.Namespace) -> CompileContext:
    return compile_config(args.config, compile_options(args, require_env=args.require_env))


def _print_diagnostics(ctx: CompileContext, fmt: str, stream: Any) -> None:
    text = render(ctx.sink.items, fmt, ctx.sources)
    if text:
        stream.write(text)


def _status(args: argparse.Namespace, line: str) -> None:
    """A human status line on stderr; none with ``--format json`` (the exit code says it)."""
    if args.format != "json":
        print(line, file=sys.stderr)


def plan_text(plan: RoutingPlan) -> str:
    return canonical_json(plan.model_dump(mode="json"))


def run_compile(args: argparse.Namespace) -> int:
    if not _config_exists(args.config):
        return 2
    ctx = _compile(args)
    _print_diagnostics(ctx, args.format, sys.stderr)
    if ctx.plan is None:
        _status(args, f"{args.config}: no plan written ({summary(ctx.sink.items)})")
        return 1
    text = plan_text(ctx.plan)
    if args.check:
        return _check_plan(args.check, args.config, text, ctx.plan.content_hash, quiet=args.format == "json")
    if args.output:
        if not written(args.output, text):
            return 2
        _status(args, f"wrote {args.output} ({ctx.plan.content_hash})")
    else:
        sys.stdout.write(text)
    return 0


def _check_plan(path: str, config: str, text: str, content_hash: str, *, quiet: bool = False) -> int:
    """Exit 1 with a short diff when the committed plan at ``path`` is not what ``config`` compiles to."""
    try:
        current = read_committed(path)
    except OutputError as exc:
        print(f"interlock: {exc}", file=sys.stderr)
        return 2
    if current == text:
        if not quiet:
            print(f"{path} is up to date ({content_hash})", file=sys.stderr)
        return 0
    if quiet:  # --format json: the exit code alone says the plan is stale or missing
        return 1
    state = "does not exist" if current is None else "is stale"
    print(f"{path} {state}: run `interlock compile {config} -o {path}`", file=sys.stderr)
    if current is not None:
        diff = list(
            difflib.unified_diff(
                current.splitlines(),
                text.splitlines(),
                f"{path} (committed)",
                f"{path} (compiled)",
                lineterm="",
            )
        )
        shown = diff[:MAX_DIFF_LINES]
        sys.stderr.write("".join(line + "\n" for line in shown))
        if len(diff) > len(shown):
            print(f"... {len(diff) - len(shown)} more diff lines", file=sys.stderr)
    return 1


def run_lint(args: argparse.Namespace) -> int:
    if not _config_exists(args.config):
        return 2
    ctx = _compile(args)
    if args.scan:
        from interlock.scan import scan_into

        scan_into(ctx, args.config, args.scan, log=None if args.format == "json" else sys.stderr)
    _print_diagnostics(ctx, args.format, sys.stdout)
    failed = bool(ctx.sink.errors) or (args.strict and bool(ctx.sink.warnings))
    if args.format == "text" and not ctx.sink.items:
        print(f"{args.config}: ok ({summary(ctx.sink.items)})")
    if args.format == "text" and args.strict and not ctx.sink.errors and ctx.sink.warnings:
        print("--strict: warnings fail the check")
    return 1 if failed else 0


def run_explain(args: argparse.Namespace) -> int:
    if not _config_exists(args.config):
        return 2
    if not is_config(args.config):
        return _explain_plan(args)
    ctx = compile_config(args.config, compile_options(args))
    if args.alias not in ctx.aliases and args.alias in ctx.sources.named["aliases"]:
        print(f"alias `{args.alias}` has errors: run `interlock lint {args.config}`", file=sys.stderr)
        return 1
    if args.alias not in ctx.aliases:
        known = sorted(ctx.aliases)
        hint = did_you_mean(args.alias, known) or f"declared: {', '.join(known) or 'none'}"
        print(f"alias `{args.alias}` is not declared in {args.config}; {hint}", file=sys.stderr)
        return 2
    if ctx.sink.errors:
        print(f"note: the configuration has {summary(ctx.sink.items)}; see `interlock lint`", file=sys.stderr)
    sys.stdout.write(explain(ctx, args.alias))
    if not (args.down or args.saturated):
        return 0
    if ctx.plan is None:
        print("no plan to simulate: the configuration has errors (see `interlock lint`)", file=sys.stderr)
        return 1
    return _what_if(args, ctx.plan, leading="\n")


def _explain_plan(args: argparse.Namespace) -> int:
    """``explain PLAN ALIAS``: the alias's chain as the plan holds it, under ``--down``/``--saturated``."""
    plan = read_plan("explain", args.config, args)
    if plan is None:
        return 1
    if args.alias not in plan.aliases:
        known = sorted(plan.aliases)
        hint = did_you_mean(args.alias, known) or f"declared: {', '.join(known) or 'none'}"
        print(f"alias `{args.alias}` is not in the plan {args.config}; {hint}", file=sys.stderr)
        return 2
    return _what_if(args, plan)


def _what_if(args: argparse.Namespace, plan: RoutingPlan, leading: str = "") -> int:
    from interlock.commands.whatif_walk import Scenario, UnknownPart, render_text, simulate

    try:
        scenario = Scenario.parse(plan, args.down, args.saturated)
    except UnknownPart as exc:
        print(f"interlock explain: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(leading + render_text(simulate(plan, scenario, [args.alias])))
    return 0


def _config_exists(path: str) -> bool:
    problem = source_problem(path)
    if problem is None:
        return True
    print(f"interlock: configuration file `{path}` {problem.problem}", file=sys.stderr)
    return False


def schemas() -> dict[str, str]:
    """File name -> canonical JSON Schema text."""
    out: dict[str, str] = {}
    for filename, model, title in (
        ("config.schema.json", SourceFile, "interlock configuration source file"),
        ("plan.schema.json", RoutingPlan, "interlock routing plan"),
    ):
        schema = model.model_json_schema()
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["title"] = title
        out[filename] = canonical_json(schema)
    return out


def run_schema(args: argparse.Namespace) -> int:
    if args.check:
        stale = []
        for filename, text in schemas().items():
            path = os.path.join(args.output, filename)
            try:
                if read_committed(path) == text:
                    continue
            except OutputError as exc:
                print(f"interlock: {exc}", file=sys.stderr)
                return 2
            stale.append(path)
        for path in stale:
            print(f"{path} is stale: run `interlock schema -o {args.output}`", file=sys.stderr)
        return 1 if stale else 0
    try:
        os.makedirs(args.output, exist_ok=True)  # a folder of schemas: `-o` names it, so it is made
        for filename, text in schemas().items():
            write_atomically(os.path.join(args.output, filename), text)
            print(f"wrote {os.path.join(args.output, filename)}", file=sys.stderr)
    except (OutputError, OSError) as exc:
        print(f"interlock: {exc}", file=sys.stderr)
        return 2
    return 0
