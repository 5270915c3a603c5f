"""Slots: per-model limits, max_concurrent, the bounded fair queue, and release on every ending."""

from __future__ import annotations

import asyncio

import pytest

from interlock.runtime.base.errors import SlotUnavailable
from interlock.runtime.loaded.callers import Turn
from interlock.runtime.state.pool import SlotPool


async def settle() -> None:
    """Let every ready task run (a few loop turns)."""
    for _ in range(5):
        await asyncio.sleep(0)


def pool(max_concurrent: int = 2, max_waiting: int = 2, max_wait_s: float = 5.0) -> SlotPool:
    return SlotPool("box", max_concurrent, max_waiting, max_wait_s)


def test_per_model_limit_and_max_concurrent() -> None:
    p = pool(max_concurrent=3)
    a1 = p.try_acquire("a", 1)
    assert a1 is not None
    assert p.try_acquire("a", 1) is None
    b1, b2 = p.try_acquire("b", 5), p.try_acquire("b", 5)
    assert b1 is not None
    assert b2 is not None
    assert p.try_acquire("c", 5) is None  # max_concurrent reached
    a1.release()
    a1.release()  # idempotent
    assert (p.in_use, p.per_model) == (2, {"b": 2})


def test_a_freed_slot_goes_to_the_first_waiter_that_can_use_it() -> None:
    async def scenario() -> list[str]:
        p = pool(max_concurrent=2, max_waiting=5)
        held_a = p.try_acquire("a", 1)
        held_b = p.try_acquire("b", 2)
        assert held_a is not None
        assert held_b is not None
        order: list[str] = []

        async def want(model: str, limit: int, name: str) -> None:
            lease = await p.acquire(model, limit)
            order.append(name)
            await asyncio.sleep(0)
            lease.release()

        tasks = [asyncio.create_task(want("a", 1, "a-first")), asyncio.create_task(want("b", 2, "b-second"))]
        await asyncio.sleep(0)
        assert len(p.waiters) == 2
        held_b.release()  # a is still at its model limit: b's waiter gets the slot, FIFO notwithstanding
        await settle()
        assert order == ["b-second"]
        held_a.release()
        await asyncio.gather(*tasks)
        assert (p.in_use, p.per_model, len(p.waiters)) == (0, {}, 0)
        return order

    assert asyncio.run(scenario()) == ["b-second", "a-first"]


def test_a_full_queue_is_refused_at_once_with_retry_after() -> None:
    async def scenario() -> None:
        p = pool(max_concurrent=1, max_waiting=1, max_wait_s=2.5)
        assert p.try_acquire("a", 1) is not None
        waiting = asyncio.create_task(p.acquire("a", 1))
        await asyncio.sleep(0)
        with pytest.raises(
            SlotUnavailable, match=r"^worker box has no free slot for a and its queue is full \(1 waiting\)$"
        ) as info:
            await p.acquire("a", 1)
        assert info.value.retry_after == 3
        waiting.cancel()

    asyncio.run(scenario())


def test_a_wait_past_max_wait_is_refused_and_leaves_the_queue() -> None:
    async def scenario() -> None:
        p = pool(max_concurrent=1, max_waiting=4, max_wait_s=0.05)
        assert p.try_acquire("a", 1) is not None
        with pytest.raises(
            SlotUnavailable, match=r"^worker box had no free slot for a within 0.05s \(0 waiting\)$"
        ):
            await p.acquire("a", 1)
        assert (len(p.waiters), p.rejected) == (0, 1)

    asyncio.run(scenario())


def test_a_cancelled_waiter_leaves_the_queue_without_taking_a_slot() -> None:
    async def scenario() -> None:
        p = pool(max_concurrent=1, max_waiting=4)
        held = p.try_acquire("a", 1)
        assert held is not None
        waiting = asyncio.create_task(p.acquire("a", 1))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert len(p.waiters) == 0
        held.release()
        assert (p.in_use, p.per_model) == (0, {})

    asyncio.run(scenario())


def test_a_slot_handed_to_a_waiter_that_is_cancelled_is_given_back() -> None:
    async def scenario() -> None:
        p = pool(max_concurrent=1, max_waiting=4)
        held = p.try_acquire("a", 1)
        assert held is not None
        waiting = asyncio.create_task(p.acquire("a", 1))
        await asyncio.sleep(0)
        held.release()  # handed over: in_use stays 1 on the waiter's behalf
        assert p.in_use == 1
        waiting.cancel()  # ... but the waiter goes away before it runs
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert (p.in_use, p.per_model) == (0, {})

    asyncio.run(scenario())


def test_raising_max_concurrent_on_reload_wakes_waiters() -> None:
    async def scenario() -> None:
        p = pool(max_concurrent=1, max_waiting=4)
        assert p.try_acquire("a", 5) is not None
        waiting = asyncio.create_task(p.acquire("b", 5))
        await asyncio.sleep(0)
        p.configure(2, 4, 5.0)
        lease = await asyncio.wait_for(waiting, 60)  # a failure bound: the wake is immediate
        assert p.in_use == 2
        lease.release()

    asyncio.run(scenario())


def test_batch_waits_at_most_max_wait_while_interactive_work_keeps_the_slot() -> None:
    """The rule that bounds batch: it is never handed a slot while an interactive waiter can use
    it, so under interactive work that never lets up it is refused at ``max_wait`` (429 +
    ``Retry-After``) like any waiter, not starved silently; the interactive requests all ran."""
    batch, chat = Turn("jobs", batch=True), Turn("app")

    async def scenario() -> None:
        p = pool(max_concurrent=1, max_waiting=4, max_wait_s=0.2)
        held = p.try_acquire("m", 1)
        assert held is not None
        waiting = asyncio.create_task(p.acquire("m", 1, batch))
        await settle()
        served = 0
        while not waiting.done():  # every release finds an interactive waiter first
            nxt = asyncio.create_task(p.acquire("m", 1, chat))
            await settle()
            held.release()
            held = await nxt
            served += 1
        with pytest.raises(
            SlotUnavailable, match=r"^worker box had no free slot for m within 0.2s"
        ) as refused:
            await waiting
        assert refused.value.retry_after == 1
        assert served > 0
        assert p.waiters == []
        held.release()
        assert p.in_use == 0

    asyncio.run(scenario())
