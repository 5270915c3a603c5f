"""Run a fake upstream as its own process: print its URL as the first line of stdout, serve until killed."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from interlock.testing.fake_server import FakeServer
from interlock.testing.replies import Reply


def run_fake(
    prog: str,
    build: Callable[[argparse.Namespace], FakeServer],
    argv: Sequence[str] | None,
    *,
    extra: Callable[[argparse.ArgumentParser], None],
) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m interlock.testing.{prog}")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: an ephemeral one)")
    parser.add_argument("--name", default=None, help="the name shown in replies ({server})")
    parser.add_argument("--reply", dest="reply_text", default=None, help="reply text ({server}, {model})")
    parser.add_argument(
        "--chunks", type=int, default=None, help="stream chunks per reply (default: per word)"
    )
    parser.add_argument("--chunk-delay-s", type=float, default=0.0, help="delay between stream chunks")
    parser.add_argument(
        "--tool-call",
        action="append",
        default=None,
        metavar="NAME=JSON",
        help="script a tool call (repeatable; those whose tool the request offers are made, in order)",
    )
    parser.add_argument("--no-record", action="store_true", help="do not keep received requests")
    parser.add_argument("--no-uvloop", action="store_true", help="use asyncio's own event loop")
    extra(parser)
    args = parser.parse_args(argv)
    base = Reply()
    args.reply = Reply(
        text=args.reply_text if args.reply_text is not None else base.text,
        chunks=args.chunks,
        chunk_delay_s=args.chunk_delay_s,
        tool_calls=tuple(_tool_call(parser, text) for text in args.tool_call) if args.tool_call else None,
    )
    fake = build(args)
    runner = asyncio.run
    if not args.no_uvloop:
        try:
            import uvloop

            runner = uvloop.run
        except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
            pass
    runner(_serve(fake))


def _tool_call(parser: argparse.ArgumentParser, text: str) -> tuple[str, dict[str, Any]]:
    name, _, arguments = text.partition("=")
    try:
        parsed = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError as exc:
        parser.error(f"--tool-call {text!r}: the arguments are not JSON ({exc})")
    if not name or not isinstance(parsed, dict):
        parser.error(f"--tool-call {text!r}: expected NAME=JSON with a JSON object")
    return name, parsed


async def _serve(fake: FakeServer) -> None:
    await fake.astart()
    sys.stdout.write(fake.url + "\n")
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await fake.aclose()
