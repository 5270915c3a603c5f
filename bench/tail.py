"""What makes the tail at a fixed rate: the gateway served in this process, wrk paced evenly against it,
and every request's time and CPU seen from inside.

The gateway runs as ``interlock serve`` runs it (uvicorn, uvloop, the guarded protocol, the real
upstream client, ``gc_policy.settle()``), in front of bench/compare.py's nginx upstream (a fixed
answer). wrk sends ``--rate`` requests a second, evenly, over ``--connections`` connections, for
``--seconds`` (bench/load.py: its latency correction undone). Around every request the app is wrapped
to take the wall time and the loop thread's CPU time at its start and end (with several connections,
the CPU while a request is in includes the requests overlapping it); in the idle gaps (no request in
flight), the CPU the loop spent on anything else (timers, the usage ledger, probes, uvicorn's tick).
Printed:

- the client's p50/p90/p99/p99.9 and the rate reached;
- wall time in the app, CPU in the app, CPU between requests: percentiles, and the largest steps with
  the second of the run they came at (a periodic stall shows as a row of large steps);
- the cyclic collector's runs and their longest pause (``gc.callbacks``);
- this process's run-queue wait per request (``/proc/self/task/*/schedstat``: time ready to run but
  without a CPU) and its context switches: what of the tail is the machine rather than the process.

    .venv/bin/python bench/tail.py [--rate 2000] [--seconds 10] [--connections 4]

A tail made in the process shows as CPU steps as long as the tail; a tail of wall time with short CPU
steps and a run-queue wait near the CPU time is waiting for a core (other processes on it).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import uvloop
from compare import nginx_program, queue_wait_seconds, upstream_server
from gc_pauses import Pauses
from load import chat_body, run_wrk

from interlock.commands.gateway import build_gateway
from interlock.compiler import compile_config
from interlock.runtime.app.gateway import Gateway
from interlock.runtime.base import gc_policy
from interlock.runtime.base.asgi import Receive, Scope, Send
from interlock.runtime.loaded.plan import load_plan
from interlock.schema.canonical import canonical_json
from interlock.testing.in_process import serving

CONFIG = """\
version: 1
server: {{default_alias: bench/chat, alias_namespace: bench/}}
providers:
  fake: {{kind: openai, base_url: "{url}", api_key_env: null}}
aliases:
  bench/chat: {{description: chat, chain: [fake/bench-model]}}
"""


class Timed:
    """The gateway, with each request's start, wall time, the loop's CPU while it was in flight, and
    the loop's CPU in the idle gap before it (NaN when another request was in flight as it began)."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.rows: list[tuple[float, float, float, float]] = []
        self.on = False
        self._last = time.thread_time()  # when the last request ended with none left in flight
        self._in_flight = 0

    @property
    def plan(self) -> Any:  # what `serving` reads
        return self.gateway.plan

    @property
    def metrics(self) -> Any:
        return self.gateway.parts.live.metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.on or scope["type"] != "http":
            await self.gateway(scope, receive, send)
            return
        wall, cpu = time.perf_counter(), time.thread_time()
        idle = cpu - self._last if self._in_flight == 0 else float("nan")
        self._in_flight += 1
        try:
            await self.gateway(scope, receive, send)
        finally:
            self._in_flight -= 1
            now = time.thread_time()
            self.rows.append((wall, time.perf_counter() - wall, now - cpu, idle))
            if self._in_flight == 0:
                self._last = now


def switches() -> dict[str, int]:
    with open("/proc/self/status") as handle:
        return {k: int(v) for k, v in (line.split(":") for line in handle if "ctxt_switches" in line)}


def quantiles(values: list[float]) -> str:
    ordered = sorted(x for x in values if x == x)  # NaN: not measured
    if not ordered:
        return f"{'—':>8}" * 5
    pick = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.5, 0.9, 0.99, 0.999)]
    return " ".join(f"{x * 1e6:>8.0f}" for x in [*pick, ordered[-1]])


async def run(args: argparse.Namespace, url: str) -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / "interlock.yaml").write_text(CONFIG.format(url=url))
    ctx = compile_config(str(folder / "interlock.yaml"))
    assert ctx.plan is not None
    plan = load_plan(json.loads(canonical_json(ctx.plan.model_dump(mode="json"))), {})
    timed = Timed(build_gateway(plan, probes=False))
    async with serving(timed) as port:  # type: ignore[arg-type]
        target = f"http://127.0.0.1:{port}/v1/chat/completions"
        body = chat_body("bench/chat")
        await asyncio.to_thread(run_wrk, target, body, 16, 2)  # warm: pools, caches, lazy imports
        gc_policy.settle()  # as `interlock serve` does before serving
        pauses = Pauses()
        gc.callbacks.append(pauses)
        timed.on = True
        waited, switched, cpu = queue_wait_seconds(os.getpid()), switches(), time.process_time()
        result = await asyncio.to_thread(
            run_wrk, target, body, args.connections, args.seconds, rate=args.rate
        )
        timed.on = False
        gc.callbacks.remove(pauses)
        waited = queue_wait_seconds(os.getpid()) - waited
        cpu = time.process_time() - cpu
        switched = {k: v - switched[k] for k, v in switches().items()}
    rows = timed.rows[1:]  # the first "between" spans the warm-up and the set-up
    n = max(result.requests, 1)
    print(
        f"machine: {len(os.sched_getaffinity(0))} CPUs; load average "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    print(
        f"{result.requests} requests at {args.rate:g}/s asked over {args.connections} connection(s), "
        f"{result.rps:.0f}/s reached; client p50 {result.percentile_ms(0.5):.3f} ms, p90 "
        f"{result.percentile_ms(0.9):.3f}, p99 {result.percentile_ms(0.99):.2f}, p99.9 "
        f"{result.percentile_ms(0.999):.2f} ms" + (f"; failed {dict(result.errors)}" if result.errors else "")
    )
    print(f"{'µs':<34} {'p50':>8} {'p90':>8} {'p99':>8} {'p99.9':>8} {'max':>8}")
    print(f"{'wall time in the app':<34} {quantiles([r[1] for r in rows])}")
    print(f"{'loop CPU while a request is in':<34} {quantiles([r[2] for r in rows])}")
    print(f"{'loop CPU in an idle gap':<34} {quantiles([r[3] for r in rows])}")
    start = rows[0][0]
    for label, index in (("CPU while in", 2), ("CPU in an idle gap", 3)):
        top = sorted((r for r in rows if r[index] == r[index]), key=lambda r: -r[index])[:8]
        print(
            f"largest {label} (s into the run: µs): "
            + ", ".join(f"{r[0] - start:.2f}: {r[index] * 1e6:.0f}" for r in top)
        )
    by_gen = [sum(1 for r in pauses.rows if r[0] == g) for g in (0, 1, 2)]
    longest = max((r[1] for r in pauses.rows), default=0.0)
    print(f"collections gen0/1/2 {by_gen[0]}/{by_gen[1]}/{by_gen[2]}, longest {longest * 1000:.2f} ms")
    print(
        f"this process: CPU {cpu / n * 1e6:.0f} µs/request, run-queue wait {waited / n * 1e6:.0f} "
        "µs/request, "
        f"context switches {switched.get('voluntary_ctxt_switches', 0)} voluntary / "
        f"{switched.get('nonvoluntary_ctxt_switches', 0)} involuntary"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=4)
    args = parser.parse_args()
    program = nginx_program()
    if program is None:
        print("tail.py needs nginx and wrk: run bench/peers.sh", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder, upstream_server(program, Path(folder)) as (url, _):
        uvloop.run(run(args, url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
