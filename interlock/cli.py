"""The `interlock` command line. Each subcommand lives in ``interlock.commands.<name>``.

Exit codes: 0 success, 1 the input has problems (diagnostics, stale files, failed checks), 2 usage
(and an output that cannot be written: a refused `-o` target, a full or closed standard output).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections.abc import Sequence

COMMAND_MODULES: tuple[str, ...] = (
    "interlock.commands.build",  # compile, lint, explain, schema
    "interlock.commands.diff",  # diff
    "interlock.commands.codegen",  # codegen
    "interlock.commands.serve",  # serve
    "interlock.commands.status",  # status
    "interlock.commands.whatif",  # simulate
    "interlock.commands.demo",  # demo
    "interlock.commands.deploy",  # deploy
    "interlock.commands.telemetry",  # telemetry-sidecar
    "interlock.commands.keys",  # keys add
    "interlock.commands.usage",  # usage
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
    try:
        code: int = args.handler(args)
        sys.stdout.flush()
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError) and exc.errno not in (errno.ENOSPC, errno.EIO):
            raise
        _silence_stdout()
        if not isinstance(exc, BrokenPipeError):  # a reader that went away (`| head`) needs no message
            print(f"interlock: cannot write to standard output: {exc.strerror}", file=sys.stderr)
        return 2
    return code


def _silence_stdout() -> None:
    """Point standard output at /dev/null so that the interpreter's last flush does not fail again."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (captured in tests)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
