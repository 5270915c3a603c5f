"""`simulate`: what every alias would answer with if some workers or providers were down (or full).

Offline: reads a plan (or compiles a configuration) and never calls a gateway; see
``interlock.commands.whatif_walk``.
Exit codes: 0 (also when aliases are left without a candidate, unless ``--fail-if-unservable``),
1 some alias would have no candidate and ``--fail-if-unservable`` was given or the input has errors,
2 usage (an unknown worker or provider name).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from interlock.commands.options import add_source_options, read_plan


def add_scenario_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--down",
        action="append",
        default=[],
        metavar="WORKER_OR_PROVIDER[,...]",
        help="parts taken down (repeatable, or comma-separated)",
    )
    p.add_argument(
        "--saturated",
        action="append",
        default=[],
        metavar="WORKER_OR_PROVIDER[,...]",
        help="parts whose every slot is taken (requests queue there, then 429)",
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate", help="what each alias would answer with if workers or providers were down or saturated"
    )
    p.add_argument("plan", metavar="PLAN_OR_CONFIG", help="a compiled plan (.json) or a configuration")
    add_scenario_options(p)
    p.add_argument(
        "--fail-if-unservable", action="store_true", help="exit 1 when some alias would have no candidate"
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="(default: text)")
    add_source_options(p)
    p.set_defaults(handler=run_simulate)


def run_simulate(args: argparse.Namespace) -> int:
    from interlock.commands.whatif_walk import Scenario, UnknownPart, render_text, simulate

    plan = read_plan("simulate", args.plan, args)
    if plan is None:
        return 1
    try:
        scenario = Scenario.parse(plan, args.down, args.saturated)
    except UnknownPart as exc:
        print(f"interlock simulate: {exc}", file=sys.stderr)
        return 2
    outcome = simulate(plan, scenario)
    if args.format == "json":
        sys.stdout.write(json.dumps(outcome.as_json(), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(outcome))
    return 1 if args.fail_if_unservable and outcome.unservable else 0
