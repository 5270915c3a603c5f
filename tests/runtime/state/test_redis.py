"""The Redis backend on a real redis-server: lease TTL and renewals, store loss, shared circuits and
caller limits (what every backend does is in ``test_contract.py``)."""

from __future__ import annotations

import asyncio

import pytest

from interlock.runtime.base.errors import ConnectFailed, ServerError
from interlock.runtime.books.health import HealthBook
from interlock.runtime.loaded.callers import Budget, Refusal, Turn
from interlock.runtime.loaded.tables import HealthSettings, WorkerLimits
from interlock.runtime.state import open_backend
from interlock.runtime.state.counters import Claim, Held, Short
from interlock.runtime.state.redis import RedisLease, RedisOptions, RedisSlots
from interlock.runtime.state.redis_counters import IN_FLIGHT_TTL_S, RedisCounters
from tests.redis_server import RedisServer, free_port
from tests.waiting import PATIENCE_S, until

# max_wait only bounds a failure here (no test waits it out): long, so a busy machine never expires a wait
LIMITS = {"box": WorkerLimits("box", "local", None, {}, 2, {}, (), max_waiting=1, max_wait_s=60.0)}


async def replica(url: str) -> RedisSlots:
    backend = open_backend(url)
    assert isinstance(backend, RedisSlots)
    backend.configure(LIMITS)
    await backend.start()
    return backend


def test_options_come_from_the_url() -> None:
    options = RedisOptions.parse("redis://127.0.0.1:6390/2?lease_ttl=3&prefix=gw&socket_keepalive=true")
    assert options == RedisOptions("redis://127.0.0.1:6390/2?socket_keepalive=true", 3.0, "gw")


def test_a_replica_that_dies_frees_its_slots_within_the_lease_ttl(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        url = redis_server.url + "?lease_ttl=0.3"
        dying, alive = await replica(url), await replica(url)
        assert await dying.acquire("box", "m", 1, wait=True) is not None
        for task in dying._tasks:  # as if killed: no more renewals, no release
            task.cancel()
        waited = await alive.acquire("box", "m", 1, wait=True)  # max_wait 5 s > the 0.3 s TTL
        assert waited is not None
        await waited.release()
        await alive.close()

    asyncio.run(scenario())


def test_a_held_lease_is_renewed_while_the_request_runs(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        a = await replica(redis_server.url + "?lease_ttl=0.6")
        store = a.client
        try:
            held = await a.acquire("box", "m", 1, wait=True)
            assert isinstance(held, RedisLease)
            first = await store.zscore("interlock:w:box:held", held.ident)

            async def pushed_twice() -> bool:
                score = await store.zscore("interlock:w:box:held", held.ident)
                return score is not None and score >= first + 350  # two renewals, 0.2 s apart

            await until(pushed_twice, "two renewals")
            await held.release()
            assert await store.zscore("interlock:w:box:held", held.ident) is None
        finally:
            await a.close()

    asyncio.run(scenario())


def test_two_tenants_at_the_same_place_are_served_in_arrival_order_whatever_their_replica(
    redis_server: RedisServer,
) -> None:
    """Equal finish tags (each tenant's first waiter) go by who came first, as in one process: Redis
    orders equal scores by member: were a member the bare waiter id, the replica whose random id
    sorts first would go ahead. Here the later arrival's replica id sorts first."""
    one = {"box": WorkerLimits("box", "local", None, {}, 1, {}, (), max_waiting=2, max_wait_s=60.0)}

    async def scenario() -> None:
        early, late = await replica(redis_server.url), await replica(redis_server.url)
        for backend, name in ((early, "zzzzzzzzzzzz"), (late, "aaaaaaaaaaaa")):
            backend.configure(one)
            backend.replica = name
        try:
            held = await early.acquire("box", "m", 1, wait=True)
            assert held is not None
            first = asyncio.create_task(early.acquire("box", "m", 1, wait=True, turn=Turn("x")))

            async def queued(n: int) -> bool:
                return (await early.report())["box"].waiting == n

            await until(lambda: queued(1), "x to queue")
            second = asyncio.create_task(late.acquire("box", "m", 1, wait=True, turn=Turn("y")))
            await until(lambda: queued(2), "y to queue")
            await held.release()
            handed = await asyncio.wait_for(first, PATIENCE_S)
            assert handed is not None
            assert not second.done()
            await handed.release()
            after = await asyncio.wait_for(second, PATIENCE_S)
            assert after is not None
            await after.release()
        finally:
            await early.close()
            await late.close()

    asyncio.run(scenario())


def test_a_stopped_store_means_per_process_limits_never_a_hung_request(
    redis_server: RedisServer,
) -> None:
    async def scenario() -> None:
        a = await replica(redis_server.url)
        held = await a.acquire("box", "m", 1, wait=True)
        assert held is not None
        redis_server.stop()
        local = await asyncio.wait_for(a.acquire("box", "n", 1, wait=True), PATIENCE_S)  # fails open at once
        assert local is not None
        assert (a.degraded, a.fallbacks) == (True, 1)
        assert await a.acquire("box", "m", 1, wait=False) is None  # still limited, in this process
        assert await a.acquire("box", "o", 1, wait=False) is None  # the store's grant counts: 2 in use
        await local.release()
        await held.release()  # the store is gone: the TTL would free it; no error here
        redis_server.start()
        await asyncio.sleep(1.1)  # past the retry interval
        again = await a.acquire("box", "m", 1, wait=True)
        assert again is not None
        assert not a.degraded
        await again.release()
        await a.close()

    asyncio.run(scenario())


async def sharing_health(url: str) -> tuple[RedisSlots, RedisSlots, HealthBook, HealthBook]:
    """Two replicas on one store, each sharing its health book, both listening to the other's."""
    settings = HealthSettings(
        failure_threshold=1, open_for_s=60, rate_limit_open_for_s=30, probe_interval_s=5, probe_timeout_s=1
    )
    a, b = await replica(url), await replica(url)
    book_a, book_b = HealthBook(settings), HealthBook(settings)
    a.share_health(book_a)
    b.share_health(book_b)
    channel = f"{a.options.prefix}:health"

    async def both_listening() -> bool:  # a finding published before b subscribes never reaches b
        return bool((await a.client.pubsub_numsub(channel))[0][1] == 2)

    await until(both_listening, "both replicas to subscribe")
    return a, b, book_a, book_b


def test_a_circuit_opened_by_one_replica_opens_on_the_others(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        a, b, book_a, book_b = await sharing_health(redis_server.url)
        book_a.record_failure("local/m", "local@box", ConnectFailed("refused"))
        await until(lambda: not book_b.endpoint_usable("local@box"), "b to skip the dead box")
        book_a.record_success("local/m", "local@box")
        await until(lambda: book_b.endpoint_usable("local@box"), "b to use it again")
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_a_candidates_circuit_and_its_recovery_are_shared_by_the_replicas(redis_server: RedisServer) -> None:
    """Replica a's calls fail: b skips the candidate too (until about a's trial); a's check passes:
    b's next call is its trial as well (issue 40, item 2)."""

    async def scenario() -> None:
        a, b, book_a, book_b = await sharing_health(redis_server.url)
        book_a.record_failure("cloud/m", "cloud", ServerError("boom", status=503))
        await until(lambda: book_b.candidate_block("cloud/m") == "circuit_open", "b to skip it")
        until_a = book_a.candidate("cloud/m").open_until
        until_b = book_b.candidate("cloud/m").open_until
        assert until_a - 1.0 <= until_b <= until_a + 0.2 * 7.5 + 1.0  # a's trial first, b's a little later
        assert book_a.record_check("cloud/m", True, strong=True)
        await until(lambda: book_b.candidate_block("cloud/m") is None, "b to try it again")
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_an_unreachable_store_is_logged_without_its_password(caplog: pytest.LogCaptureFixture) -> None:
    secret = "hunter2-SECRET-pw"

    async def scenario() -> None:
        port = free_port()  # nothing listens there
        backend = await replica(f"redis://:{secret}@127.0.0.1:{port}/0")
        lease = await asyncio.wait_for(backend.acquire("box", "m", 1, wait=True), PATIENCE_S)
        assert lease is not None
        assert backend.degraded
        await lease.release()
        await backend.close()

    with caplog.at_level("DEBUG"):
        asyncio.run(scenario())
    assert "shared state store unreachable (ConnectionError)" in caplog.text
    assert secret not in caplog.text


def test_caller_limits_are_shared_by_the_replicas(redis_server: RedisServer) -> None:
    """Concurrency needs no clock: one count across replicas. Rates are per aligned minute, so a loop
    of at most two windows' worth must meet the refusal."""
    pair = Budget("k:ci", 0, 0, 2)
    rate = Budget("t:ops", 2, 0, 0)

    async def scenario() -> None:
        a, b = await replica(redis_server.url), await replica(redis_server.url)
        ca, cb = a.caller_counters(), b.caller_counters()
        assert isinstance(ca, RedisCounters)
        assert await ca.take([pair]) is None
        assert await cb.take([pair]) is None
        assert await ca.take([pair]) == Refusal("k:ci", "max_concurrent", 2, 1.0)
        await cb.done([pair], 0)
        assert await ca.take([pair]) is None
        refused = None
        for attempt in range(5):
            refused = await (ca, cb)[attempt % 2].take([rate])
            if refused is not None:
                break
        assert refused is not None
        assert (refused.budget, refused.limit, refused.value) == ("t:ops", "requests_per_minute", 2)
        assert 0 < refused.retry_after_s <= 60
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_caller_tokens_count_after_the_answer_and_a_lost_store_limits_per_process(
    redis_server: RedisServer,
) -> None:
    tokens = Budget("k:t", 0, 5, 0)

    async def scenario() -> None:
        a, b = await replica(redis_server.url), await replica(redis_server.url)
        ca, cb = a.caller_counters(), b.caller_counters()
        refused = None
        for _ in range(2):  # a new minute may begin between the two; not twice
            assert await ca.take([tokens]) is None
            await ca.done([tokens], 7)
            refused = await cb.take([tokens])
            if refused is not None:
                break
        assert refused is not None
        assert refused.limit == "tokens_per_minute"
        redis_server.stop()
        one = Budget("k:solo", 0, 0, 1)
        assert await asyncio.wait_for(ca.take([one]), PATIENCE_S) is None  # fails open to this process
        assert a.degraded
        assert await ca.take([one]) == Refusal("k:solo", "max_concurrent", 1, 1.0)  # still limited here
        await ca.done([one], 0)
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_a_restarted_store_is_used_again_by_the_first_burst(redis_server: RedisServer) -> None:
    """The pooled connections went stale with the restart: each call retries once on a fresh one
    instead of falling back to per-process limits (which admitted 5 of 12 under a limit of 3)."""
    three = Budget("k:burst", 0, 0, 3)

    async def scenario() -> None:
        a, b = await replica(redis_server.url), await replica(redis_server.url)
        ca, cb = a.caller_counters(), b.caller_counters()
        for counters in (ca, cb):  # every replica holds a pooled connection
            assert await asyncio.wait_for(counters.take([three]), PATIENCE_S) is None
            await asyncio.wait_for(counters.done([three], 0), PATIENCE_S)
        redis_server.stop()
        redis_server.start()
        burst = asyncio.gather(*((ca, cb)[i % 2].take([three]) for i in range(12)))
        answers = await asyncio.wait_for(burst, PATIENCE_S)
        assert sum(answer is None for answer in answers) == 3
        assert not a.degraded
        assert not b.degraded
        await asyncio.wait_for(a.close(), PATIENCE_S)
        await asyncio.wait_for(b.close(), PATIENCE_S)

    asyncio.run(scenario())


def test_tokens_held_by_requests_in_flight_count_across_replicas_until_done(
    redis_server: RedisServer,
) -> None:
    """The hold needs no clock: it counts until `done`, whatever minute it is (the tokens used are
    added to the minute's window, so a new minute in between can only admit more, never fewer)."""
    tokens = Budget("k:held", 0, 100, 0)

    async def scenario() -> None:
        a, b = await replica(redis_server.url), await replica(redis_server.url)
        ca, cb = a.caller_counters(), b.caller_counters()
        assert await ca.take([tokens], 60) is None
        assert await cb.take([tokens], 60) is None
        refused = await ca.take([tokens], 60)
        assert refused is not None
        assert refused.limit == "tokens_per_minute"
        await ca.done([tokens], 0, 60)
        await cb.done([tokens], 0, 60)  # both settled, nothing used: admitted again
        assert await ca.take([tokens], 60) is None
        await ca.done([tokens], 0, 60)
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_a_credits_hold_expires_unless_touched_and_a_lost_store_holds_per_process(
    redis_server: RedisServer,
) -> None:
    """A replica killed mid-request never sends its unclaim: the hold's TTL lets go of it."""
    claim = Claim("k:c:tokens", 100, 10, 60)

    async def scenario() -> None:
        a = await replica(redis_server.url)
        ca = a.caller_counters()
        assert isinstance(ca, RedisCounters)
        held = await ca.claim([claim])
        assert isinstance(held, Held)
        name = f"{a.options.prefix}:q:{claim.name}"
        assert 0 < await a.client.ttl(name) <= IN_FLIGHT_TTL_S
        assert int(await a.client.get(name)) == 60
        await ca.unclaim(held)
        assert await a.client.exists(name) == 0  # nothing left behind at zero
        stored = await ca.claim([claim])  # held in the store while it goes
        assert isinstance(stored, Held)
        assert not stored.spare
        redis_server.stop()
        spare = await asyncio.wait_for(ca.claim([claim]), PATIENCE_S)  # fails open to this process
        assert isinstance(spare, Held)
        assert spare.spare
        assert a.degraded
        assert await ca.claim([Claim(claim.name, 100, 50, 0)]) == Short(0, 60)  # still held here
        await ca.unclaim(spare)
        assert ca.spare.counters.claimed == {}
        await ca.unclaim(stored)  # the store's: not reachable, the TTL lets go of it; never raises
        await a.close()

    asyncio.run(scenario())


def test_after_a_restart_stale_connections_recover_and_old_releases_free_nothing_twice(
    redis_server: RedisServer,
) -> None:
    """Leases, caller counts and credits holds taken before a restart (the store forgets them all) and
    given back after it, over the replicas' stale pooled connections: every call works at once (no
    per-process fallback), and what the old ones give back frees nothing the new ones hold (the
    counters never go below zero), so exactly the limits are admitted again."""
    two = Budget("k:stale", 0, 0, 2)
    claim = Claim("k:stale:tokens", 100, 10, 40)

    async def scenario() -> None:
        a, b = await replica(redis_server.url), await replica(redis_server.url)
        ca, cb = a.caller_counters(), b.caller_counters()
        old_leases = [await a.acquire("box", "m", 2, wait=False), await b.acquire("box", "m", 2, wait=False)]
        assert await ca.take([two]) is None
        assert await cb.take([two]) is None
        old_holds = [await ca.claim([claim]), await cb.claim([claim])]
        redis_server.stop()
        redis_server.start()
        new_leases = [await a.acquire("box", "m", 2, wait=False), await b.acquire("box", "m", 2, wait=False)]
        assert all(lease is not None for lease in new_leases)  # the store forgot the old two
        for lease in old_leases:  # given back after the restart: must not free the new ones
            assert lease is not None
            await asyncio.wait_for(lease.release(), PATIENCE_S)
        await asyncio.wait_for(ca.done([two], 0), PATIENCE_S)
        await asyncio.wait_for(cb.done([two], 0), PATIENCE_S)
        for held in old_holds:
            assert isinstance(held, Held)
            await asyncio.wait_for(ca.unclaim(held), PATIENCE_S)
        assert await a.acquire("box", "m", 2, wait=False) is None  # still 2 of 2: the new ones
        assert [await ca.take([two]), await cb.take([two])] == [None, None]
        assert await ca.take([two]) == Refusal("k:stale", "max_concurrent", 2, 1.0)
        holds = [await ca.claim([claim]), await cb.claim([claim]), await ca.claim([claim])]
        assert [h.claims[0].hold if isinstance(h, Held) else h for h in holds] == [40, 40, 20]
        assert not a.degraded
        assert not b.degraded
        assert (a.fallbacks, b.fallbacks) == (0, 0)
        for lease in new_leases:
            assert lease is not None
            await lease.release()
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_leases_held_across_a_restart_are_held_again_by_their_renewal(redis_server: RedisServer) -> None:
    """The store restarted empty while two requests still run on a's slots: a's next renewal holds
    them again, so b is not granted the worker's two slots a second time (before: it was, for as long
    as the requests ran); a lease released while a renewal is under way is not held again."""

    async def scenario() -> None:
        url = redis_server.url + "?lease_ttl=0.6"  # renewals every 0.2 s
        a, b = await replica(url), await replica(url)
        running = [await a.acquire("box", "m", 2, wait=False) for _ in range(2)]
        assert all(lease is not None for lease in running)
        redis_server.stop()
        redis_server.start()

        async def held_again() -> bool:
            return await b.client.zcard("interlock:w:box:held") == 2

        await until(held_again, "a's renewal to hold its two leases again")
        assert await b.acquire("box", "m", 2, wait=False) is None
        for lease in running:
            assert lease is not None
            await lease.release()

        async def freed() -> bool:
            return await b.client.zcard("interlock:w:box:held") == 0

        await until(freed, "the releases")
        for _ in range(3):  # renewals go on: nothing released comes back
            await asyncio.sleep(0.2)
            assert await b.client.zcard("interlock:w:box:held") == 0
        granted = await b.acquire("box", "m", 2, wait=False)
        assert granted is not None
        await granted.release()
        await a.close()
        await b.close()

    asyncio.run(scenario())
