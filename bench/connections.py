"""The cost of the HTTP server layer: interlock's protocol beside uvicorn's own and beside the floor.

Each server answers a trivial ASGI app (reads the body, answers a small JSON) in a process of its own:

- ``guarded``: interlock's ``net.connections`` protocol (HTTP/1.1 on httptools, the timeouts, the
  connection cap) under uvicorn's process runner, as ``interlock serve`` runs it;
- ``uvicorn``: uvicorn's own httptools protocol (``HttpToolsProtocol``), the same runner;
- ``floor``: a protocol that writes a canned answer for every read, no parsing, no ASGI: what uvloop
  and the kernel cost;
- ``base``: with ``--base DIR``, the guarded protocol of another checkout (a ``git worktree`` of an
  older commit), so a before/after comes from one run.

The servers run side by side and take turns, round after round, under the same keep-alive load (wrk,
or bench/load.py with ``--aiohttp``). Prints each round, then the medians: requests/s and the server's
CPU time per request (from /proc), with each one's ratio to uvicorn's.

    .venv/bin/python bench/connections.py [--seconds 3] [--concurrency 16] [--rounds 5] [--base DIR]

On a shared machine, compare the ratios of one run, not absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway import cpu_seconds
from load import LoadResult, chat_body, run_load, run_wrk

ANSWER = b'{"ok":true}'
CANNED = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n" + ANSWER
KINDS = ("uvicorn", "guarded", "floor")


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


class Floor(asyncio.Protocol):
    """A canned answer for every read (one request per read under a closed-loop load)."""

    def __init__(self, **_: Any) -> None:
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(CANNED)

    def shutdown(self) -> None:
        self.transport.close()


def serve(kind: str, port: int) -> None:
    """In the child: uvicorn (uvloop) with ``kind``'s protocol on 127.0.0.1:port."""
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from interlock.runtime.net.connections import ConnectionBook, guarded_protocol

    protocol: type[Any] = Floor if kind == "floor" else HttpToolsProtocol
    if kind == "guarded":
        settings = SimpleNamespace(header_timeout_s=10.0, body_timeout_s=30.0, max_connections=1024)
        counter = SimpleNamespace(set=lambda value: None, inc=lambda amount=1.0: None)
        metrics = SimpleNamespace(
            connections_open=counter, connections_closed=SimpleNamespace(labels=lambda *v: counter)
        )
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
        server_header=False,  # as `interlock serve` runs it
        date_header=False,
        proxy_headers=False,
    )
    uvicorn.Server(config).run()


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start(kind: str, source: Path | None) -> tuple[subprocess.Popen[bytes], str]:
    """The server for ``kind`` (from ``source``'s checkout when given), once it accepts: (process, URL)."""
    port = free_port()
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source.resolve())
    serving = "guarded" if kind == "base" else kind
    command = [sys.executable, __file__, "--serve", serving, "--port", str(port)]
    child = subprocess.Popen(command, env=env, cwd=source.resolve() if source is not None else None)
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.02)
    return child, f"http://127.0.0.1:{port}/v1/chat/completions"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", type=Path, default=None, help="also this checkout's guarded protocol")
    parser.add_argument("--aiohttp", action="store_true", help="drive the load with bench/load.py, not wrk")
    parser.add_argument("--serve", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return

    def load(url: str, seconds: float) -> LoadResult:
        if args.aiohttp:
            return asyncio.run(run_load(url, chat_body("m"), args.concurrency, seconds, warmup_s=0.0))
        return run_wrk(url, chat_body("m"), args.concurrency, seconds)

    kinds = [*KINDS, *(["base"] if args.base is not None else [])]
    servers = {kind: start(kind, args.base if kind == "base" else None) for kind in kinds}
    figures: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
    try:
        for _, url in servers.values():
            load(url, 1.0)  # warm-up
        for round_ in range(args.rounds):
            for kind in kinds if round_ % 2 == 0 else kinds[::-1]:
                child, url = servers[kind]
                before = cpu_seconds(child.pid)
                result = load(url, args.seconds)
                cpu_us = (cpu_seconds(child.pid) - before) / max(result.requests, 1) * 1e6
                figures[kind].append((result.rps, cpu_us))
                print(
                    f"round {round_ + 1} {kind:8} {result.rps:8.0f} req/s {cpu_us:6.1f} µs CPU/request "
                    f"(load {load_average()})"
                )
    finally:
        for child, _ in servers.values():
            child.terminate()
            child.wait(10)
    medians = {
        kind: (statistics.median(r for r, _ in f), statistics.median(c for _, c in f))
        for kind, f in figures.items()
    }
    rps_ref, cpu_ref = medians["uvicorn"]
    print(f"medians of {args.rounds} rounds, {args.concurrency} clients:")
    for kind, (rps, cpu_us) in medians.items():
        print(
            f"  {kind:8} {rps:8.0f} req/s ({rps / rps_ref:.2f}x uvicorn) "
            f"{cpu_us:6.1f} µs CPU/request ({cpu_us / cpu_ref:.2f}x)"
        )


if __name__ == "__main__":
    main()
