"""Per-request cost of each slot backend, side by side in one run: in-process, embedded, Redis.

One "request" is what the router does per admitted call on an Ollama worker: ``acquire`` a slot (free
at once) and ``release`` it. Measured from one event loop, as a worker process would:

- ``memory``: this process's table (``--workers 1``);
- ``embedded``: the supervisor's ``SlotServer`` (here on a thread of this process, as in the supervisor)
  and its slot file, where a free slot is taken with no message (``--workers N``);
- ``redis``: a real ``redis-server`` started on a free port for the run (``--state-url redis://``);
- ``shm+lock`` (a floor, not a backend): a counter in shared memory behind a ``multiprocessing.Lock``
  (a futex: no system call when nobody contends; no queue, no crash recovery).

Printed: microseconds of wall time per request, one at a time and with 16 at once, and the ratio to
``memory``. Figures are from one run on whatever machine runs it; compare ratios, not absolutes.

    .venv/bin/python bench/state_backends.py [--requests 5000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from interlock.runtime.loaded.tables import WorkerLimits
from interlock.runtime.state import open_backend
from interlock.runtime.state.base import SlotBackend
from interlock.runtime.state.embedded import SlotServer
from tests.redis_server import RedisServer

T = TypeVar("T")
LIMITS = {"box": WorkerLimits("box", "local", None, {}, 64, {}, (), max_waiting=64, max_wait_s=5.0)}
CONCURRENCY = 16


async def cycle(backend: SlotBackend) -> None:
    lease = await backend.acquire("box", "m", 64, wait=True)
    assert lease is not None
    await lease.release()


async def timed(step: Callable[[], Awaitable[None]], requests: int, concurrency: int) -> float:
    """Microseconds of wall time per request."""

    async def run(n: int) -> None:
        for _ in range(n):
            await step()

    started = time.perf_counter()
    await asyncio.gather(*(run(requests // concurrency) for _ in range(concurrency)))
    return (time.perf_counter() - started) / (requests // concurrency * concurrency) * 1e6


async def measure(url: str, requests: int, rounds: int) -> tuple[float, float]:
    backend = open_backend(url)
    backend.configure(LIMITS)
    await backend.start()
    try:
        if backend.degraded:
            raise RuntimeError(f"{url}: the store is unreachable")
        await timed(lambda: cycle(backend), 200, 1)  # warm up (connections, scripts loaded)
        one = min([await timed(lambda: cycle(backend), requests, 1) for _ in range(rounds)])
        many = min([await timed(lambda: cycle(backend), requests, CONCURRENCY) for _ in range(rounds)])
        return one, many
    finally:
        await backend.close()


async def ping_floor(url: str, requests: int, rounds: int) -> float:
    """One bare round trip to Redis with the same client: the least a shared-store request costs."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    try:
        await client.ping()
        return min([await timed(client.ping, requests, 1) for _ in range(rounds)])
    finally:
        await client.aclose()


def run_loop(work: Coroutine[Any, Any, T]) -> T:
    """On uvloop, as ``interlock serve`` runs."""
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(work)


def shm_floor(requests: int, rounds: int) -> float:
    lock = multiprocessing.get_context("spawn").Lock()
    counter = multiprocessing.get_context("spawn").RawValue("i", 0)
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(requests):
            with lock:
                counter.value += 1
            with lock:
                counter.value -= 1
        best = min(best, (time.perf_counter() - started) / requests * 1e6)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="interlock-bench-"))
    server = SlotServer(str(folder / "slots.sock"))
    server.start()
    redis = RedisServer(folder).start() if shutil.which("redis-server") else None
    try:
        rows: list[tuple[str, float, float]] = []
        for name, url in (
            ("memory", "memory:"),
            ("embedded", f"unix:{server.path}"),
            ("redis", redis.url if redis else ""),
        ):
            if not url:
                print(f"{name}: skipped (redis-server is not installed)")
                continue
            one, many = run_loop(measure(url, args.requests, args.rounds))
            rows.append((name, one, many))
        base_one, base_many = rows[0][1], rows[0][2]
        print(f"acquire + release per request, best of {args.rounds} rounds of {args.requests}")
        print(f"{'backend':<10} {'1 at a time':>14} {'ratio':>8} {f'{CONCURRENCY} at once':>14} {'ratio':>8}")
        for name, one, many in rows:
            print(
                f"{name:<10} {one:>11.1f} µs {one / base_one:>7.1f}x "
                f"{many:>11.1f} µs {many / base_many:>7.1f}x"
            )
        if redis is not None:
            ping = run_loop(ping_floor(redis.url, args.requests, args.rounds))
            print(f"{'redis PING':<10} {ping:>11.1f} µs {ping / base_one:>7.1f}x {'(one round trip)':>24}")
        floor = shm_floor(args.requests, args.rounds)
        print(f"{'shm+lock':<10} {floor:>11.1f} µs {floor / base_one:>7.1f}x {'(floor, one process)':>24}")
    finally:
        server.stop()
        if redis is not None:
            redis.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
