"""The `interlock` command line. Each subcommand lives in ``interlock.commands.<name>``.

Exit codes: 0 success, 1 the input has problems (diagnostics, stale files, failed checks), 2 usage.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES: tuple[str, ...] = (
    "interlock.commands.build",  # compile, lint, explain, schema
    "interlock.commands.diff",  # diff
    "interlock.commands.codegen",  # codegen
    "interlock.commands.serve",  # serve
    "interlock.commands.status",  # status
    "interlock.commands.demo",  # demo
    "interlock.commands.telemetry",  # telemetry-sidecar
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interlock",
        description="Compile LLM gateway configuration into a frozen routing plan, and serve it.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
