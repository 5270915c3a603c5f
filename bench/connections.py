"""The cost of the connection guard: uvicorn's httptools protocol beside interlock's GuardedProtocol.

Each protocol serves a trivial ASGI app (reads the body, answers a small JSON) in a process of its
own; bench/load.py drives each with the same keep-alive load, the protocols alternating run by run.
Prints requests/s and the server's CPU time per request (from /proc), and the guarded/plain ratio.

    .venv/bin/python bench/connections.py [--seconds 3] [--concurrency 16] [--runs 3]

On a shared machine, compare the ratio, not the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import chat_body, run_load

ANSWER = b'{"ok":true}'


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"11")],
        }
    )
    await send({"type": "http.response.body", "body": ANSWER})


def serve(kind: str, port: int) -> None:
    """In the child: uvicorn with the plain or the guarded protocol on 127.0.0.1:port."""
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from interlock.runtime.metrics import Metrics
    from interlock.runtime.serving.connections import ConnectionBook, guarded_protocol

    protocol: type[Any] = HttpToolsProtocol
    if kind == "guarded":
        settings = SimpleNamespace(header_timeout_s=10.0, body_timeout_s=30.0, max_connections=1024)
        metrics = Metrics(None)  # type: ignore[arg-type]  # only the counters are used here
        protocol = guarded_protocol(ConnectionBook(lambda: settings, metrics))  # type: ignore[arg-type, return-value]
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http=protocol,
        ws="none",
        lifespan="off",
        log_level="warning",
        access_log=False,
    )
    uvicorn.Server(config).run()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(kind: str, seconds: float, concurrency: int) -> tuple[float, float]:
    """(requests/s, server CPU µs per request) of one run."""
    port = free_port()
    child = subprocess.Popen([sys.executable, __file__, "--serve", kind, "--port", str(port)])
    try:
        for _ in range(500):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.02)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        before = cpu_seconds(child.pid)
        result = asyncio.run(run_load(url, chat_body("m"), concurrency, seconds, warmup_s=0.0))
        spent = cpu_seconds(child.pid) - before  # (a few requests past the end are not counted)
        return result.rps, spent / max(result.requests, 1) * 1e6
    finally:
        child.terminate()
        child.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--serve", choices=("plain", "guarded"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    best: dict[str, tuple[float, float]] = {}
    for run in range(args.runs):
        for kind in ("plain", "guarded") if run % 2 == 0 else ("guarded", "plain"):
            rps, cpu_us = measure(kind, args.seconds, args.concurrency)
            print(f"run {run + 1} {kind:8} {rps:8.0f} req/s  {cpu_us:6.1f} µs server CPU per request")
            if kind not in best or cpu_us < best[kind][1]:
                best[kind] = (rps, cpu_us)
    (plain_rps, plain_cpu), (guarded_rps, guarded_cpu) = best["plain"], best["guarded"]
    print(
        f"best of {args.runs}: guarded/plain CPU per request {guarded_cpu / plain_cpu:.3f} "
        f"({guarded_cpu:.1f} vs {plain_cpu:.1f} µs); req/s {guarded_rps / plain_rps:.3f}"
    )


if __name__ == "__main__":
    main()
