"""`diff`: what routing will do differently between two plans, configs, or a config and its git past."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from interlock.commands.options import add_source_options, compile_options
from interlock.diff import Change, Classification, diff_plans
from interlock.diff.inputs import InputError, PlanInput, load_plan
from interlock.diff.render import FORMATS, render

FAIL_ON: dict[str, frozenset[Classification]] = {
    "credentials": frozenset({Classification.CREDENTIALS}),
    "breaking": frozenset({Classification.CREDENTIALS, Classification.BREAKING}),
    "routing": frozenset({Classification.CREDENTIALS, Classification.BREAKING, Classification.ROUTING}),
    "any": frozenset(Classification),
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "diff",
        help="show what routing does differently between two plans or configs",
        usage=(
            "interlock diff [options] BASE HEAD\n       interlock diff [options] --base-ref REF [BASE] HEAD"
        ),
        description=(
            "BASE and HEAD are each a compiled plan (JSON) or a config file. With --base-ref, BASE is "
            "read as it was at a git ref (BASE defaults to HEAD's path); --head-ref does the same for HEAD."
        ),
    )
    p.add_argument("inputs", nargs="+", metavar="FILE", help="BASE and HEAD: plan or config files")
    p.add_argument("--base-ref", metavar="REF", help="read BASE as it was at this git ref")
    p.add_argument("--head-ref", metavar="REF", help="read HEAD as it was at this git ref")
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    p.add_argument(
        "--fail-on",
        choices=tuple(FAIL_ON),
        help="exit 1 when a change of this class (or a more severe one) is found; `any`: any change",
    )
    add_source_options(p)
    p.set_defaults(handler=run_diff, parser=p)


def run_diff(args: argparse.Namespace) -> int:
    paths: list[str] = args.inputs
    if len(paths) > 2 or (len(paths) == 1 and args.base_ref is None):
        args.parser.error("give BASE and HEAD, or --base-ref REF and HEAD")
    base_path, head_path = (paths[0], paths[-1]) if len(paths) == 2 else (paths[0], paths[0])
    sides: list[PlanInput] = []
    errors: list[dict[str, str]] = []
    for path, ref in ((base_path, args.base_ref), (head_path, args.head_ref)):
        try:
            sides.append(load_plan(path, ref, compile_options(args)))
        except InputError as exc:
            errors.append({"input": path if ref is None else f"{path}@{ref}", "error": str(exc)})
    if errors:
        if args.format == "json":  # stderr stays machine-readable too: one array of the inputs' errors
            sys.stderr.write(json.dumps(errors, indent=2, ensure_ascii=False) + "\n")
        else:
            sys.stderr.write("".join(f"error: {e['error']}\n" for e in errors))
        return 1
    base, head = sides
    changes = diff_plans(base.plan, head.plan)
    sys.stdout.write(render(changes, args.format, base, head))
    return 1 if args.fail_on and _fails(changes, FAIL_ON[args.fail_on]) else 0


def _fails(changes: list[Change], classes: frozenset[Classification]) -> bool:
    return any(change.classification in classes for change in changes)
