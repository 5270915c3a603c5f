"""`compile`, `lint`, `explain` and `schema`: the compiler's commands."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from interlock.compiler import CompileContext, CompileOptions, compile_config
from interlock.compiler.report import FORMATS, render, summary
from interlock.schema.canonical import canonical_json
from interlock.schema.config import SourceFile
from interlock.schema.plan import RoutingPlan


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
    p.add_argument("config")
    p.add_argument("alias")
    p.set_defaults(handler=run_explain)

    p = subparsers.add_parser("schema", help="write the JSON Schemas of the configuration and the plan")
    p.add_argument("-o", "--output", default="schema", help="folder (default: schema/)")
    p.set_defaults(handler=run_schema)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default="text", help="diagnostics format")
    p.add_argument(
        "--require-env", action="store_true", help="fail when a referenced credential variable is unset"
    )


def _compile(args: argparse.Namespace) -> CompileContext:
    options = CompileOptions(require_env=getattr(args, "require_env", False))
    return compile_config(args.config, options)


def _print_diagnostics(ctx: CompileContext, fmt: str, stream: Any) -> None:
    text = render(ctx.sink.items, fmt, ctx.sources)
    if text:
        stream.write(text)


def plan_text(plan: RoutingPlan) -> str:
    return canonical_json(plan.model_dump(mode="json"))


def run_compile(args: argparse.Namespace) -> int:
    ctx = _compile(args)
    _print_diagnostics(ctx, args.format, sys.stderr)
    if ctx.plan is None:
        return 1
    text = plan_text(ctx.plan)
    if args.check:
        try:
            with open(args.check, encoding="utf-8") as handle:
                current = handle.read()
        except FileNotFoundError:
            current = None
        if current != text:
            state = "does not exist" if current is None else "is stale"
            print(
                f"{args.check} {state}: run `interlock compile {args.config} -o {args.check}`",
                file=sys.stderr,
            )
            return 1
        print(f"{args.check} is up to date ({ctx.plan.content_hash})", file=sys.stderr)
        return 0
    if args.output:
        _write(args.output, text)
        print(f"wrote {args.output} ({ctx.plan.content_hash})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def run_lint(args: argparse.Namespace) -> int:
    ctx = _compile(args)
    if args.scan:
        from interlock.scan import scan_into

        scan_into(ctx, args.config, args.scan, log=sys.stderr)
    _print_diagnostics(ctx, args.format, sys.stdout)
    failed = bool(ctx.sink.errors) or (args.strict and bool(ctx.sink.warnings))
    if args.format == "text" and not ctx.sink.items:
        print(f"{args.config}: ok ({summary(ctx.sink.items)})")
    return 1 if failed else 0


def run_explain(args: argparse.Namespace) -> int:
    ctx = compile_config(args.config)
    alias = ctx.aliases.get(args.alias)
    if alias is None:
        known = ", ".join(sorted(ctx.aliases)) or "none"
        print(f"alias `{args.alias}` is not declared in {args.config} (declared: {known})", file=sys.stderr)
        return 1
    if ctx.sink.errors:
        print(f"note: the configuration has {summary(ctx.sink.items)}; see `interlock lint`", file=sys.stderr)
    out = [f"{alias.name}: {alias.section.description}".rstrip(": ")]
    out.append(f"  defined at {alias.entry.key_span}")
    out.append(f"  requires: {', '.join(alias.section.requires) or 'nothing'}")
    for number, link in enumerate(ctx.expanded.get(alias.name, []), start=1):
        out.append(f"  {number}. {link.candidate}")
        for name, span in link.via:
            out.append(f"       from {name} at {span}")
        out.extend(f"       {line}" for line in _candidate_facts(ctx, link.candidate))
    print("\n".join(out))
    return 0


def _candidate_facts(ctx: CompileContext, candidate: str) -> list[str]:
    provider_name, _, model = candidate.partition("/")
    facts = ctx.models.get(candidate)
    caps = facts.facts.capabilities if facts else None
    lines = [f"capabilities: {', '.join(caps) if caps is not None else 'unknown'}"]
    if facts and facts.facts.context_tokens:
        lines.append(f"context: {facts.facts.context_tokens} tokens")
    provider = ctx.providers.get(provider_name)
    if provider is None:
        return lines
    if provider.section.kind == "openai":
        lines.append(f"provider {provider_name}: {provider.section.base_url}")
        return lines
    from interlock.compiler.emit import slot_limit

    for worker in ctx.workers.values():
        if worker.provider == provider_name:
            slots = slot_limit(worker.patterns, worker.max_concurrent, model)
            lines.append(f"worker {worker.name} {worker.url}: {slots} slot(s) of {worker.max_concurrent}")
    return lines


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
    os.makedirs(args.output, exist_ok=True)
    for filename, text in schemas().items():
        _write(os.path.join(args.output, filename), text)
        print(f"wrote {os.path.join(args.output, filename)}", file=sys.stderr)
    return 0


def _write(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)
