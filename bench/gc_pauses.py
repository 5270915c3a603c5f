"""The cyclic collector under a steady rate: how often it runs in the gateway's process, what it finds,
and how long it stops the event loop each time.

The gateway runs as ``interlock serve`` runs it (uvicorn, uvloop, the guarded protocol, the real upstream
client, ``gc_policy.settle()``'s thresholds) in this process, against a fake OpenAI upstream in a process
of its own; a client thread sends requests on keep-alive raw sockets, paced evenly at ``--rate``
requests a second, for ``--seconds``. ``gc.callbacks`` times every collection. Printed: requests sent,
collections by generation, objects they found, the longest pause and the total. Run it at two commits
to compare (before no-cycles-per-request, c66c308, a young collection found ~48,000 objects every
~1,500 requests).

    .venv/bin/python bench/gc_pauses.py [--rate 1000] [--seconds 10] [--stream]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import uvloop

from interlock.commands.gateway import build_gateway
from interlock.compiler import compile_config
from interlock.runtime.base import gc_policy
from interlock.runtime.loaded.plan import load_plan
from interlock.schema.canonical import canonical_json
from interlock.testing.fake_process import FakeProcess
from interlock.testing.in_process import chat_request, read_answer, serving

CONFIG = """\
version: 1
server: {{default_alias: bench/chat, alias_namespace: bench/}}
providers:
  cloud: {{kind: openai, base_url: "{url}", api_key_env: null, probe: false}}
  spare: {{kind: openai, base_url: "{url}", api_key_env: null, probe: false}}
aliases:
  bench/chat: {{description: chat, chain: [cloud/m, spare/n]}}
"""

ASK = b'{"messages": [{"role": "user", "content": "hi"}]}'
STREAM = b'{"messages": [{"role": "user", "content": "hi"}], "stream": true}'


class Pauses:
    """Every collection's generation, duration and what it found (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, float, int]] = []
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.rows.append((info["generation"], time.perf_counter() - self._began, info["collected"]))


def paced(port: int, body: bytes, rate: float, seconds: float, connections: int, sent: list[int]) -> None:
    """Requests at an even ``rate`` over ``connections`` keep-alive sockets, each answer read whole."""
    request = chat_request(body)
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
    buffers = [b""] * connections
    interval, start = 1.0 / rate, time.perf_counter()
    n = 0
    while (now := time.perf_counter()) - start < seconds:
        due = start + n * interval
        if due > now:
            time.sleep(due - now)
        i = n % connections
        socks[i].sendall(request)
        _, buffers[i] = read_answer(socks[i], buffers[i])
        n += 1
    sent.append(n)
    for sock in socks:
        sock.close()


async def run(args: argparse.Namespace, url: str) -> tuple[int, Pauses]:
    folder = Path(tempfile.mkdtemp())
    (folder / "interlock.yaml").write_text(CONFIG.format(url=url))
    ctx = compile_config(str(folder / "interlock.yaml"))
    assert ctx.plan is not None
    plan = load_plan(json.loads(canonical_json(ctx.plan.model_dump(mode="json"))), {})
    gateway = build_gateway(plan, probes=False)
    async with serving(gateway) as port:
        body = STREAM if args.stream else ASK
        sent: list[int] = []
        warm = threading.Thread(target=paced, args=(port, body, 200, 1.0, args.connections, []))
        warm.start()
        while warm.is_alive():  # noqa: ASYNC110 - a thread
            await asyncio.sleep(0.01)
        gc_policy.settle()  # as `interlock serve` does before serving
        pauses = Pauses()
        gc.callbacks.append(pauses)
        client = threading.Thread(
            target=paced, args=(port, body, args.rate, args.seconds, args.connections, sent)
        )
        client.start()
        while client.is_alive():  # noqa: ASYNC110 - a thread
            await asyncio.sleep(0.05)
        gc.callbacks.remove(pauses)
    return sent[0], pauses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--stream", action="store_true")
    args = parser.parse_args()
    with FakeProcess("openai") as fake:
        requests, pauses = uvloop.run(run(args, fake.base_url))
    rows = pauses.rows
    by_gen = {g: sum(1 for r in rows if r[0] == g) for g in (0, 1, 2)}
    longest = max((r[1] for r in rows), default=0.0)
    print(f"machine: {len(os.sched_getaffinity(0))} CPUs; load average {os.getloadavg()[0]:.2f}")
    print(
        f"{requests} {'streamed ' if args.stream else ''}requests at {args.rate:g}/s: "
        f"collections gen0/1/2 {by_gen[0]}/{by_gen[1]}/{by_gen[2]}, "
        f"objects found {sum(r[2] for r in rows)}, longest pause {longest * 1000:.2f} ms, "
        f"total {sum(r[1] for r in rows) * 1000:.1f} ms"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
