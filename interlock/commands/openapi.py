"""`openapi`: write the OpenAPI document of the gateway's HTTP routes (``runtime.ops.openapi``).

The document written here accepts any model name; a running gateway's ``/openapi.json`` is the same
document with ``model`` limited to its plan's aliases (and direct models), and only the surfaces its plan
serves (``server.surfaces``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from interlock.commands.files import OutputError, read_committed, written
from interlock.schema.canonical import canonical_json


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("openapi", help="write the OpenAPI document of the gateway's HTTP routes")
    p.add_argument("-o", "--output", help="file (default: standard output)")
    p.add_argument("--check", action="store_true", help="fail when the file is stale (needs -o)")
    p.set_defaults(handler=run_openapi)


def run_openapi(args: argparse.Namespace) -> int:
    from interlock.runtime.ops.openapi import document

    text = canonical_json(document())
    if args.check:
        if args.output is None:
            print("interlock openapi: --check needs -o FILE", file=sys.stderr)
            return 2
        try:
            if read_committed(args.output) == text:
                return 0
        except OutputError as exc:
            print(f"interlock: {exc}", file=sys.stderr)
            return 2
        print(f"{args.output} is stale: run `interlock openapi -o {args.output}`", file=sys.stderr)
        return 1
    if args.output is None:
        sys.stdout.write(text)
        return 0
    if not written(args.output, text):
        return 2
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
