"""Shared slots through a Redis switch-over, on a real redis-server (issue 39, items 8 and 9).

- The documented bound while the store is out is ``max_concurrent`` per process: with a 1-slot worker
  and two replicas, 2. It holds when the store dies under a request it granted (the replica's own table
  counts that slot), and when the store comes back empty while slots granted alone are still held (the
  replica stays on its own table until they end). Before: 3 at once, both ways.
- A paused store that runs an acquire after its replica gave up on it (and fell back) grants nothing:
  the call carried the server time past which nobody waits for it. Before: the late call held the only
  slot until the lease TTL, every replica answered 429 while the worker sat idle.
"""

from __future__ import annotations

import asyncio
import os
import signal

from interlock.runtime.loaded.tables import WorkerLimits
from interlock.runtime.state import open_backend
from interlock.runtime.state.base import Lease
from interlock.runtime.state.redis import RedisSlots
from tests.redis_server import RedisServer
from tests.waiting import until

ONE_SLOT = {"box": WorkerLimits("box", "local", None, {}, 1, {}, (), max_waiting=0, max_wait_s=0.0)}


async def replica(url: str) -> RedisSlots:
    backend = open_backend(url)
    assert isinstance(backend, RedisSlots)
    backend.configure(ONE_SLOT)
    await backend.start()
    return backend


async def take(backend: RedisSlots) -> Lease | None:
    return await backend.acquire("box", "m", 1, wait=False)


def test_a_store_that_dies_under_a_granted_slot_keeps_one_per_process(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        a, b = await replica(redis_server.url), await replica(redis_server.url)
        running = [await take(a)]  # granted by the store
        assert running[0] is not None
        assert await take(b) is None  # the store holds the one slot
        redis_server.stop()
        assert await take(a) is None  # a's own table knows the store's slot is a's: no second one
        alone = await take(b)
        assert alone is not None  # b is alone now: one per process
        assert a.degraded
        assert b.degraded
        running.append(alone)
        assert sum(r is not None for r in running) == 2
        for lease in running:
            assert lease is not None
            await lease.release()
        assert await take(a) is not None  # a's table let go of the store's slot with the request
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_a_store_back_empty_counts_nothing_until_the_slots_granted_alone_end(
    redis_server: RedisServer,
) -> None:
    async def scenario() -> None:
        a, b = await replica(redis_server.url), await replica(redis_server.url)
        redis_server.stop()
        first, second = await take(a), await take(b)  # one each, alone
        assert first is not None
        assert second is not None
        redis_server.start()  # empty: it knows of neither
        await until(lambda: a._usable() and b._usable(), "the retry interval to pass", pause_s=0.05)
        assert await take(a) is None  # a still holds a slot the store does not know of
        assert await take(b) is None
        await first.release()
        shared = await take(a)  # a is on the store again
        assert shared is not None
        assert not a.degraded
        assert await take(b) is None  # b's own slot still runs: 2 at most, never 3
        await second.release()
        assert await take(b) is None  # the store counts a's
        await shared.release()
        again = await take(b)
        assert again is not None
        await again.release()
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_an_acquire_the_paused_store_runs_late_holds_no_slot(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        url = redis_server.url + "?lease_ttl=30"  # a late grant would hold the slot 30 s
        a, b = await replica(url), await replica(url)
        warm = await take(a)  # the scripts are loaded (a late EVALSHA of an unknown one would do nothing)
        assert warm is not None
        await warm.release()
        assert redis_server.proc is not None
        os.kill(redis_server.proc.pid, signal.SIGSTOP)
        try:
            alone = await take(a)  # times out on the paused store, then granted by a's own table
            assert alone is not None
            assert a.degraded
            await alone.release()
        finally:
            os.kill(redis_server.proc.pid, signal.SIGCONT)
        await b.client.ping()  # the store has run what waited in its sockets before this
        assert await b.client.zcard("interlock:w:box:held") == 0
        granted = await take(b)  # the slot is free for whoever asks next
        assert granted is not None
        await granted.release()
        await a.close()
        await b.close()

    asyncio.run(scenario())
