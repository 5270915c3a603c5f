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
from collections.abc import Mapping, Sequence

COMMANDS: Mapping[str, str] = {  # each subcommand -> the module that registers it (in --help's order)
    "init": "interlock.commands.init",
    "compile": "interlock.commands.build",
    "lint": "interlock.commands.build",
    "explain": "interlock.commands.build",
    "schema": "interlock.commands.build",
    "openapi": "interlock.commands.openapi",
    "diff": "interlock.commands.diff",
    "codegen": "interlock.commands.codegen",
    "serve": "interlock.commands.serve",
    "status": "interlock.commands.status",
    "simulate": "interlock.commands.whatif",
    "demo": "interlock.commands.demo",
    "deploy": "interlock.commands.deploy",
    "connect": "interlock.commands.connect",
    "telemetry-sidecar": "interlock.commands.telemetry",
    "keys": "interlock.commands.keys",
    "usage": "interlock.commands.usage",
}
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMANDS.values()))


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given a known ``command``, only the module that defines it is imported.

    Importing every command module loads the compiler, the diff and the code generators, which
    `interlock serve` does not need: starting the gateway is faster without them (bench/serve_start.py).
    """
    parser = argparse.ArgumentParser(
        prog="interlock",
        description="Compile LLM gateway configuration into a frozen routing plan, and serve it.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    module = COMMANDS.get(command) if command is not None else None
    modules = (module,) if module is not None else COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments[0] if arguments else None)  # `-h` first, or a typo: every command
    args = parser.parse_args(arguments)
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
