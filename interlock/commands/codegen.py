"""`codegen`: consumer constants (TypeScript or Python) generated from the aliases."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from interlock.codegen import LANGUAGES, CodegenError, generate, valid_name
from interlock.commands.files import OutputError, read_committed, written
from interlock.commands.options import add_source_options, compile_options
from interlock.diff.inputs import InputError, load_plan


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "codegen",
        help="generate consumer constants (TypeScript or Python) from the aliases",
        description=(
            "Writes one constant naming every alias, e.g. `MANA_LLM.FAST_TEXT = 'mana/fast-text'`, with "
            "each alias's description as its doc comment."
        ),
    )
    p.add_argument("source", metavar="CONFIG|PLAN", help="a config file or a compiled plan")
    p.add_argument("--lang", choices=tuple(LANGUAGES), required=True, help="the consumers' language")
    p.add_argument(
        "--name", help="the constant's name (default: from the alias namespace, `mana/` -> `MANA_LLM`)"
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output)")
    out.add_argument("--check", metavar="FILE", help="fail when FILE is not what would be generated")
    add_source_options(p)
    p.set_defaults(handler=run_codegen, parser=p)


def run_codegen(args: argparse.Namespace) -> int:
    if args.name is not None and not valid_name(args.name):
        args.parser.error(f"--name: `{args.name}` is not an identifier (letters, digits, `_`)")
    try:
        plan = load_plan(args.source, options=compile_options(args)).plan
        text = generate(plan, args.lang, args.name)
    except (InputError, CodegenError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.check:
        return _check(args, text)
    if args.output:
        if not written(args.output, text, make_folders=True):
            return 2
        print(f"wrote {args.output} ({len(plan.aliases)} aliases)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _check(args: argparse.Namespace, text: str) -> int:
    try:
        current = read_committed(args.check)
    except OutputError as exc:
        print(f"interlock: {exc}", file=sys.stderr)
        return 2
    if current == text:
        print(f"{args.check} is up to date", file=sys.stderr)
        return 0
    state = "does not exist" if current is None else "is stale"
    name = f" --name {args.name}" if args.name else ""
    fix = f"interlock codegen {args.source} --lang {args.lang}{name} -o {args.check}"
    print(f"{args.check} {state}: run `{fix}`", file=sys.stderr)
    return 1
