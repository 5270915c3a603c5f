"""The options every command that reads a configuration shares: where includes may come from, how big
a file may be. One definition, so `lint`, `compile`, `explain`, `diff` and `codegen` read alike."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from interlock.compiler import CompileOptions
from interlock.compiler.reading import MAX_FILE_BYTES, FileReader

if TYPE_CHECKING:
    from interlock.schema.plan import RoutingPlan


def add_source_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--include-root",
        action="append",
        default=[],
        metavar="DIR",
        help="also allow includes and profile files under DIR (default: only the main file's folder tree)",
    )
    p.add_argument(
        "--max-file-bytes",
        type=_positive,
        default=MAX_FILE_BYTES,
        metavar="N",
        help=f"refuse a source file larger than N bytes (default: {MAX_FILE_BYTES:,})",
    )


def compile_options(args: argparse.Namespace, **extra: Any) -> CompileOptions:
    """``CompileOptions`` from the shared flags, plus ``extra`` fields."""
    return CompileOptions(
        reader=FileReader(args.max_file_bytes), include_roots=tuple(args.include_root), **extra
    )


def read_plan(command: str, path: str, args: argparse.Namespace) -> RoutingPlan | None:
    """The plan ``path`` holds, or the one its configuration compiles to under the shared flags;
    ``None`` once ``interlock COMMAND: why`` is on stderr."""
    from interlock.diff.inputs import InputError, load_plan

    try:
        return load_plan(path, options=compile_options(args)).plan
    except InputError as exc:
        print(f"interlock {command}: {exc}", file=sys.stderr)
        return None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
