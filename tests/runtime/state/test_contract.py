"""What every slot backend promises, run on each one: this process's table (``memory:``), the
supervisor's table over a real Unix socket (``unix:``) and a real redis-server (``redis://``).

Two holders share one store: two replicas on Redis, two worker processes' clients of one slot server,
and, for ``memory:``, one table seen twice (its holders are one process's requests). What only one
backend does (a lost connection, a lease's TTL, falling back when the store goes) stays in its own
module beside this one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from interlock.runtime.base.errors import SlotUnavailable
from interlock.runtime.loaded.callers import COMMON, Budget, Refusal, Turn
from interlock.runtime.loaded.tables import WorkerLimits
from interlock.runtime.state import BACKENDS, open_backend
from interlock.runtime.state.base import Lease, SlotBackend
from interlock.runtime.state.counters import Claim, Held, Short
from interlock.runtime.state.embedded import SlotServer
from tests.redis_server import RedisServer
from tests.waiting import PATIENCE_S, until

# max_wait only bounds a failure here (no test waits it out): long, so a busy machine never expires a wait
LIMITS = {"box": WorkerLimits("box", "local", None, {}, 2, {}, (), max_waiting=1, max_wait_s=60.0)}


@pytest.fixture(params=["memory", "unix", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL both holders open: a store of this test's own."""
    if request.param == "memory":
        yield "memory:"
    elif request.param == "unix":
        server = SlotServer(str(tmp_path / "slots.sock"))
        server.start()
        try:
            yield f"unix:{server.path}"
        finally:
            server.stop()
    else:
        redis = RedisServer(tmp_path).start()
        try:
            yield redis.url
        finally:
            redis.stop()


@asynccontextmanager
async def holders(
    url: str, limits: dict[str, WorkerLimits] = LIMITS
) -> AsyncIterator[tuple[SlotBackend, SlotBackend]]:
    """Two holders of one store, started; closed at the end."""
    first = open_backend(url)
    second = first if url == "memory:" else open_backend(url)
    for backend in {id(first): first, id(second): second}.values():
        backend.configure(limits)
        await backend.start()
    try:
        yield first, second
    finally:
        for backend in {id(first): first, id(second): second}.values():
            await backend.close()


async def waiting(backend: SlotBackend) -> int:
    return (await backend.report())["box"].waiting


def test_the_suite_covers_every_backend_of_the_table() -> None:
    assert BACKENDS
    assert set(BACKENDS) - {"rediss"} == {"memory", "unix", "redis"}  # rediss: Redis over TLS


def test_one_limit_one_queue_and_the_freed_slot_goes_to_the_waiter(store_url: str) -> None:
    async def scenario() -> None:
        async with holders(store_url) as (a, b):
            held = await a.acquire("box", "m", 1, wait=True)
            assert held is not None
            assert await b.acquire("box", "m", 1, wait=False) is None  # a's slot counts for b
            other = await b.acquire("box", "other", 1, wait=False)  # another model: its own limit
            assert other is not None
            queued = asyncio.create_task(b.acquire("box", "m", 1, wait=True))
            await until(lambda: waiting(a), "b to queue")
            with pytest.raises(
                SlotUnavailable, match=r"^worker box has no free slot for m and its queue is full"
            ):
                await a.acquire("box", "m", 1, wait=True)
            await held.release()
            assert await a.acquire("box", "m", 1, wait=False) is None  # b queued first: no overtaking
            handed = await asyncio.wait_for(queued, PATIENCE_S)  # woken by the release
            assert isinstance(handed, Lease)
            report = (await a.report())["box"]
            assert (report.in_use, dict(report.per_model), report.waiting) == (2, {"m": 1, "other": 1}, 0)
            assert report.rejected >= 1
            await handed.release()
            await handed.release()  # idempotent
            await other.release()

            async def free() -> bool:
                return (await b.report())["box"].in_use == 0

            await until(free, "every slot back")

    asyncio.run(scenario())


def test_a_reload_that_changes_the_slot_count_holds_for_every_holder(store_url: str) -> None:
    """Two slots held, a request queued; the plan drops to one slot (as each process reloads it): a slot
    given back leaves the one held at the new bound, so the waiter waits on; raised to three, it runs."""
    fewer = {"box": replace(LIMITS["box"], max_concurrent=1)}
    more = {"box": replace(LIMITS["box"], max_concurrent=3)}

    async def scenario() -> None:
        async with holders(store_url) as (a, b):
            first = await a.acquire("box", "m", 2, wait=True)
            second = await a.acquire("box", "x", 2, wait=True)
            assert first is not None
            assert second is not None
            queued = asyncio.create_task(b.acquire("box", "y", 2, wait=True))
            await until(lambda: waiting(a), "b to queue")
            for holder in {id(a): a, id(b): b}.values():
                holder.configure(fewer)
            await first.release()
            report = (await a.report())["box"]  # read after the release (one connection, in order)
            assert (report.in_use, report.waiting) == (1, 1)
            assert await a.acquire("box", "z", 2, wait=False) is None
            for holder in {id(a): a, id(b): b}.values():
                holder.configure(more)
            handed = await asyncio.wait_for(queued, PATIENCE_S)
            assert handed is not None
            third = await a.acquire("box", "z", 2, wait=False)  # 3 of 3
            assert third is not None
            assert await b.acquire("box", "w", 2, wait=False) is None
            for lease in (second, handed, third):
                await lease.release()

    asyncio.run(scenario())


def test_a_full_queue_says_when_to_come_back(store_url: str) -> None:
    async def scenario() -> None:
        async with holders(store_url) as (a, b):
            held = [await a.acquire("box", "m", 1, wait=True), await b.acquire("box", "x", 2, wait=True)]
            queued = asyncio.create_task(b.acquire("box", "m", 1, wait=True))
            await until(lambda: waiting(a), "the queue to fill")
            with pytest.raises(SlotUnavailable) as refused:
                await a.acquire("box", "y", 1, wait=True)
            assert refused.value.retry_after == 60  # the queue's max_wait
            queued.cancel()
            for lease in held:
                assert lease is not None
                await lease.release()

    asyncio.run(scenario())


def test_a_cancelled_wait_gives_its_queue_place_back(store_url: str) -> None:
    async def scenario() -> None:
        async with holders(store_url) as (a, b):
            held = await a.acquire("box", "m", 1, wait=True)
            assert held is not None
            queued = asyncio.create_task(b.acquire("box", "m", 1, wait=True))
            await until(lambda: waiting(a), "b to queue")
            queued.cancel()
            with pytest.raises(asyncio.CancelledError):
                await queued

            async def left() -> bool:
                return await waiting(a) == 0

            await until(left, "the queue place to go")
            await held.release()
            again = await a.acquire("box", "m", 1, wait=False)  # nothing was left behind by the cancel
            assert again is not None
            await again.release()

    asyncio.run(scenario())


def test_caller_concurrency_is_one_count_for_every_holder(store_url: str) -> None:
    pair = Budget("t:ops", 0, 0, 2)

    async def scenario() -> None:
        async with holders(store_url) as (a, b):
            ca = a.caller_counters()  # one per process, as the gateway keeps it
            cb = ca if a is b else b.caller_counters()
            assert await ca.take([pair]) is None
            assert await cb.take([pair]) is None
            assert await ca.take([pair]) == Refusal("t:ops", "max_concurrent", 2, 1.0)
            await cb.done([pair], 0)

            async def room() -> bool:
                return await ca.take([pair]) is None

            await until(room, "b's share to come back")  # the done may reach the store a moment later
            await ca.done([pair], 0)
            await ca.done([pair], 0)

    asyncio.run(scenario())


def test_credits_holds_are_one_count_for_every_holder_and_a_short_level_holds_nothing(store_url: str) -> None:
    """85 tokens of room: each request asks 10 now and holds 40 until it ends."""
    key, tenant = Claim("k:crowd:tokens", 85, 10, 40), Claim("t:lab:tokens", 1_000, 10, 40)

    async def scenario() -> None:
        async with holders(store_url) as (a, b):
            ca = a.caller_counters()
            cb = ca if a is b else b.caller_counters()
            first = await ca.claim([key, tenant])
            second = await cb.claim([key, tenant])  # 40 held, 10 asked: within 85
            assert isinstance(first, Held)
            assert isinstance(second, Held)
            assert await ca.claim([tenant, key]) == Short(1, 80)  # the key is short: the tenant holds nothing
            third = await cb.claim([tenant])  # so the tenant's holds are 80 + 40
            assert isinstance(third, Held)
            assert await ca.claim([Claim("t:lab:tokens", 129, 10, 0)]) == Short(0, 120)
            await cb.unclaim(second)

            async def room() -> bool:
                taken = await ca.claim([key])
                if isinstance(taken, Held):
                    await ca.unclaim(taken)
                return isinstance(taken, Held)

            await until(room, "b's hold to come back")  # the unclaim may reach the store a moment later
            assert await ca.claim([Claim("k:crowd:tokens", 49, 10, 0)]) == Short(0, 40)
            await ca.unclaim(first)
            await cb.unclaim(third)

            async def free() -> bool:
                return isinstance(await ca.claim([Claim("t:lab:tokens", 10, 10, 0)]), Held)

            await until(free, "every hold to come back")

    asyncio.run(scenario())


# --- the fair queue (runtime/state/fair.py): who is handed the slot that frees ---------------------

ONE_SLOT = {"box": WorkerLimits("box", "local", None, {}, 1, {}, (), max_waiting=64, max_wait_s=60.0)}


async def admitted(a: SlotBackend, arrivals: list[tuple[SlotBackend, Turn, str]]) -> list[str]:
    """With the one slot held, queue ``arrivals`` in that order (each seen queued before the next
    comes), then give the slot back again and again: the names in the order the slot was handed."""
    held = await a.acquire("box", "m", 1, wait=True)
    assert held is not None
    pending: dict[asyncio.Task[Lease | None], str] = {}
    for count, (holder, turn, name) in enumerate(arrivals, 1):
        pending[asyncio.create_task(holder.acquire("box", "m", 1, wait=True, turn=turn))] = name

        async def queued(count: int = count) -> bool:
            return await waiting(a) == count

        await until(queued, f"{name} to queue")
    order: list[str] = []
    while pending:
        await held.release()
        done, _ = await asyncio.wait(pending, timeout=PATIENCE_S, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1, f"{len(done)} waiters started on one slot"
        task = done.pop()
        order.append(pending.pop(task))
        held = task.result()
        assert held is not None
    await held.release()
    return order


def test_a_quiet_tenant_is_not_queued_behind_a_flooder_and_the_flooder_keeps_every_free_slot(
    store_url: str,
) -> None:
    """Ten waiters of one tenant, then two of another: the quiet tenant's i-th request is handed a
    slot among the first 2i (its equal share; ties between tenants go either way), not after the
    ten; and every slot that frees once it has none waiting goes to the flooder (work-conserving).
    With no tenant (one share for all) the same arrivals are first come, first served."""
    flood, quiet = Turn("flood", 1.0), Turn("quiet", 1.0)

    async def scenario() -> None:
        async with holders(store_url, ONE_SLOT) as (a, b):
            arrivals = [(a, flood, f"f{i}") for i in range(10)] + [(b, quiet, "q0"), (b, quiet, "q1")]
            order = await admitted(a, arrivals)
            assert order.index("q0") < 2, order
            assert order.index("q1") < 4, order
            assert sorted(order) == sorted(name for _, _, name in arrivals)
            assert [n for n in order if n.startswith("f")] == [f"f{i}" for i in range(10)]  # its own FIFO
            fifo = await admitted(a, [(holder, COMMON, name) for holder, _, name in arrivals])
            assert fifo == [name for _, _, name in arrivals]

    asyncio.run(scenario())


def test_a_claim_is_granted_what_the_room_leaves_of_its_hold_in_one_step(store_url: str) -> None:
    """100 tokens of room, each request asks 10 and would hold 40: the third is granted the 20 left (its
    output is capped to them), the fourth is short; giving the 20 back frees exactly 20."""
    claim = Claim("k:cap:tokens", 100, 10, 40)

    async def scenario() -> None:
        async with holders(store_url) as (a, b):
            ca = a.caller_counters()
            cb = ca if a is b else b.caller_counters()
            first, second, third = await ca.claim([claim]), await cb.claim([claim]), await ca.claim([claim])
            assert isinstance(first, Held)
            assert isinstance(second, Held)
            assert isinstance(third, Held)
            assert [held.claims[0].hold for held in (first, second, third)] == [40, 40, 20]
            assert await cb.claim([claim]) == Short(0, 100)
            await ca.unclaim(third)

            async def twenty() -> bool:  # the unclaim may reach the store a moment later
                taken = await cb.claim([Claim("k:cap:tokens", 100, 20, 40)])
                if isinstance(taken, Held):
                    assert taken.claims[0].hold == 20
                    await cb.unclaim(taken)
                return isinstance(taken, Held)

            await until(twenty, "the 20 to come back")
            assert await ca.claim([Claim("k:cap:tokens", 100, 21, 40)]) == Short(0, 80)
            await ca.unclaim(first)
            await cb.unclaim(second)

    asyncio.run(scenario())


def test_tenants_that_both_wait_share_the_slots_by_weight(store_url: str) -> None:
    light, heavy = Turn("light", 1.0), Turn("heavy", 3.0)

    async def scenario() -> None:
        async with holders(store_url, ONE_SLOT) as (a, b):
            arrivals = [(a, light, f"l{i}") for i in range(8)] + [(b, heavy, f"h{i}") for i in range(8)]
            order = await admitted(a, arrivals)
            first = [name[0] for name in order[:8]]
            assert (first.count("h"), first.count("l")) == (6, 2), order  # 3:1 while both wait

    asyncio.run(scenario())


def test_batch_takes_a_slot_only_when_no_interactive_request_waits(store_url: str) -> None:
    """Batch waiters queued first, interactive ones after: each freed slot goes to an interactive
    waiter while one waits (so an interactive request waits at most for the slot that frees first),
    then batch gets every slot (it fills idle capacity)."""
    bulk, chat = Turn("bulk", 1.0, batch=True), Turn("chat", 1.0)

    async def scenario() -> None:
        async with holders(store_url, ONE_SLOT) as (a, b):
            arrivals = [(a, bulk, f"b{i}") for i in range(4)] + [(b, chat, "i0"), (a, chat, "i1")]
            assert await admitted(a, arrivals) == ["i0", "i1", "b0", "b1", "b2", "b3"]

    asyncio.run(scenario())


def test_a_full_queue_turns_away_whoever_would_be_served_last(store_url: str) -> None:
    """Two places, both a flooder's: a quiet tenant's newcomer takes the last one (its holder gets the
    429), the flooder's next newcomer is refused. (With no tenant every newcomer would be last: a full
    queue refuses it, as ``test_a_full_queue_says_when_to_come_back`` shows.)"""
    flood, quiet = Turn("flood"), Turn("quiet")
    two = {"box": WorkerLimits("box", "local", None, {}, 1, {}, (), max_waiting=2, max_wait_s=60.0)}

    async def scenario() -> None:
        async with holders(store_url, two) as (a, b):
            held = await a.acquire("box", "m", 1, wait=True)
            assert held is not None
            first = asyncio.create_task(a.acquire("box", "m", 1, wait=True, turn=flood))
            await until(lambda: waiting(a), "f0 to queue")
            last = asyncio.create_task(a.acquire("box", "m", 1, wait=True, turn=flood))

            async def full() -> bool:
                return await waiting(a) == 2

            await until(full, "f1 to queue")
            quiet_one = asyncio.create_task(b.acquire("box", "m", 1, wait=True, turn=quiet))
            with pytest.raises(SlotUnavailable, match=r"a request of a tenant with less waiting took"):
                await asyncio.wait_for(last, PATIENCE_S)
            await until(full, "q0 to queue in f1's place")
            with pytest.raises(SlotUnavailable, match=r"its queue is full \(2 waiting\)$"):
                await a.acquire("box", "m", 1, wait=True, turn=flood)  # it would be last: refused
            await held.release()
            handed = await asyncio.wait_for(first, PATIENCE_S)
            assert handed is not None
            assert not quiet_one.done()
            await handed.release()
            after = await asyncio.wait_for(quiet_one, PATIENCE_S)
            assert after is not None
            await after.release()

    asyncio.run(scenario())


def test_a_reservation_is_what_the_minutes_tokens_leave_of_its_hold_in_one_step(store_url: str) -> None:
    """100 tokens a minute, each request would hold 60 and needs 11 (its prompt and one token): the
    second is given the 40 left (its output is cut to them), the third is refused; what ends gives back
    only what it was given."""
    rate = Budget("k:rate", 0, 100, 0)

    async def scenario() -> None:
        async with holders(store_url) as (a, b):
            ca = a.caller_counters()
            cb = ca if a is b else b.caller_counters()
            assert await ca.reserve([rate], 60, 11) == 60
            assert await cb.reserve([rate], 60, 11) == 40
            refused = await ca.reserve([rate], 60, 11)
            assert isinstance(refused, Refusal)
            assert refused.limit == "tokens_per_minute"
            await cb.done([rate], 0, 40)

            async def forty() -> bool:  # the done may reach the store a moment later
                answer = await ca.reserve([rate], 60, 40)
                if isinstance(answer, int):
                    assert answer == 40  # 60 still held
                return isinstance(answer, int)

            await until(forty, "the 40 to come back")
            assert isinstance(await cb.reserve([rate], 60, 1), Refusal)  # all 100 held
            await ca.done([rate], 0, 40)
            await ca.done([rate], 0, 60)

    asyncio.run(scenario())
