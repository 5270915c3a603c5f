"""The embedded backend: the supervisor's slot server and worker clients, on a real Unix socket (what
every backend does is in ``test_contract.py``; this module holds what only this one does)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from interlock.runtime.base.errors import ConnectFailed, ServerError
from interlock.runtime.books.health import HealthBook
from interlock.runtime.loaded.callers import Budget, Refusal
from interlock.runtime.loaded.tables import HealthSettings, WorkerLimits
from interlock.runtime.state import open_backend
from interlock.runtime.state.counters import Claim, Held, Short
from interlock.runtime.state.embedded import EmbeddedCounters, EmbeddedSlots, SlotServer
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.state.redis import RedisSlots
from tests.waiting import PATIENCE_S, until

# max_wait only bounds a failure here (no test waits it out): long, so a busy machine never expires a wait
LIMITS = {"box": WorkerLimits("box", "local", None, {}, 2, {}, (), max_waiting=1, max_wait_s=60.0)}


async def client(server: SlotServer) -> EmbeddedSlots:
    backend = EmbeddedSlots(server.path)
    backend.configure(LIMITS)
    await backend.start()
    return backend


def test_the_table_lists_every_backend() -> None:
    assert isinstance(open_backend(None), MemorySlots)
    assert isinstance(open_backend("unix:/tmp/x.sock"), EmbeddedSlots)
    assert isinstance(open_backend("redis://127.0.0.1:1/0"), RedisSlots)  # connects only at start
    known = r"\(known: memory:, unix:, redis:, rediss:\)"
    with pytest.raises(ValueError, match=rf"^unknown state backend 'valkey:' {known}$"):
        open_backend("valkey://localhost")


def test_a_lost_connection_frees_its_slots_and_queue_places(server: SlotServer) -> None:
    async def scenario() -> None:
        a, b = await client(server), await client(server)
        assert await a.acquire("box", "m", 1, wait=True) is not None
        other = await b.acquire("box", "y", 2, wait=True)  # max_concurrent 2: now full
        assert other is not None
        # only now a's second request: started before b's, it could reach the server first and take the
        # last slot, leaving b to wait out max_wait
        queued = asyncio.create_task(a.acquire("box", "x", 2, wait=True))
        await until(lambda: "box" in server.table.pools, "the server to hear the bounds")
        await until(lambda: len(server.table.pools["box"].waiters) == 1, "a's second request to queue")
        await a.close()  # as a killed worker's socket closes
        queued.cancel()
        await until(lambda: server.table.pools["box"].held()[0] == 1, "a's slot to come back")
        assert len(server.table.pools["box"].waiters) == 0
        assert (await b.report())["box"].per_model == {"y": 1}
        await other.release()
        await b.close()

    asyncio.run(scenario())


def test_without_the_server_limits_hold_per_process_and_say_so(tmp_path: Path) -> None:
    async def scenario() -> None:
        lonely = EmbeddedSlots(str(tmp_path / "missing.sock"))
        lonely.configure(LIMITS)
        await lonely.start()
        assert (lonely.degraded, lonely.fallbacks) == (True, 1)
        held = await lonely.acquire("box", "m", 1, wait=True)
        assert held is not None
        assert await lonely.acquire("box", "m", 1, wait=False) is None  # the local table still limits
        await held.release()
        assert lonely.local("box").in_use == 0
        await lonely.close()

    asyncio.run(scenario())


def test_a_server_that_goes_away_fails_waiters_over_to_the_local_table(tmp_path: Path) -> None:
    async def scenario() -> None:
        slots = SlotServer(str(tmp_path / "s.sock"))
        slots.start()
        a = await client(slots)
        held = await a.acquire("box", "m", 1, wait=True)
        assert held is not None
        waiting = asyncio.create_task(a.acquire("box", "m", 1, wait=True))
        await until(lambda: "box" in slots.table.pools and slots.table.pools["box"].waiters, "the queue")
        slots.stop()
        lease = await asyncio.wait_for(waiting, PATIENCE_S)  # never hangs: the local table answers
        assert lease is not None
        assert (a.degraded, a.fallbacks) == (True, 1)
        await lease.release()
        await held.release()  # the server's slot: nothing to tell anyone
        await a.close()

    asyncio.run(scenario())


def test_an_endpoint_one_worker_finds_dead_is_skipped_by_the_others(server: SlotServer) -> None:
    settings = HealthSettings(
        failure_threshold=1, open_for_s=60, rate_limit_open_for_s=30, probe_interval_s=5, probe_timeout_s=1
    )

    async def scenario() -> None:
        a, b = await client(server), await client(server)
        # The server passes a finding on to the connections it has accepted: b's connect returns before
        # the server's thread has run its handler, so a finding sent at once could go before b is there.
        await until(lambda: server.connections == 2, "the server to accept both workers")
        book_a, book_b = HealthBook(settings), HealthBook(settings)
        a.share_health(book_a)
        b.share_health(book_b)
        book_a.record_failure("local/m", "local@box", ConnectFailed("refused"))
        assert not book_a.endpoint_usable("local@box")
        await until(lambda: not book_b.endpoint_usable("local@box"), "b to hear of it")
        book_a.record_success("local/m", "local@box")  # back
        await until(lambda: book_b.endpoint_usable("local@box"), "b to hear it is back")
        book_a.record_failure("cloud/m", "cloud", ServerError("boom", status=503))  # a candidate's circuit
        await until(lambda: book_b.candidate_block("cloud/m") == "circuit_open", "b to skip the candidate")
        book_a.record_success("cloud/m", "cloud")
        await until(lambda: book_b.candidate_block("cloud/m") is None, "b to try it again")
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_caller_limits_are_one_count_for_the_host_and_a_dead_worker_gives_its_share_back(
    server: SlotServer,
) -> None:
    pair = Budget("t:ops", 0, 0, 2)

    async def scenario() -> None:
        a, b = await client(server), await client(server)
        ca, cb = a.caller_counters(), b.caller_counters()
        assert isinstance(ca, EmbeddedCounters)
        assert await ca.take([pair]) is None
        assert await cb.take([pair]) is None
        assert await ca.take([pair]) == Refusal("t:ops", "max_concurrent", 2, 1.0)
        await cb.done([pair], 3)
        await until(lambda: server.counters.in_flight["t:ops"] == 1, "b's request to end")
        assert server.counters.tokens["t:ops"] == 3
        assert await cb.take([pair]) is None
        assert isinstance(await cb.claim([Claim("k:ops:tokens", 100, 10, 60)]), Held)
        mine = await ca.claim([Claim("k:ops:tokens", 100, 10, 30)])
        assert isinstance(mine, Held)
        assert await ca.claim([Claim("k:ops:tokens", 100, 20, 0)]) == Short(0, 90)
        a._send(["u", 10_000])  # a claim refused (or cancelled before it was held) gives back nothing
        assert await ca.claim([Claim("k:ops:tokens", 100, 20, 0)]) == Short(0, 90)  # read after it
        await b.close()  # b dies holding one, and 60 tokens of credits: the server gives them back
        await until(lambda: server.counters.in_flight["t:ops"] == 1, "b's share to come back")
        await until(lambda: server.counters.claimed == {"k:ops:tokens": 30}, "b's credits to come back")
        await ca.unclaim(mine)
        await until(lambda: server.counters.claimed == {}, "a's credits to come back")
        server.stop()
        await until(lambda: a.degraded, "a to see the server gone")
        assert await ca.take([pair]) is None  # per process now
        await ca.done([pair], 0)
        assert isinstance(ca, EmbeddedCounters)
        assert ca.spare.counters.in_flight["t:ops"] == 0
        spare = await ca.claim([Claim("k:ops:tokens", 100, 10, 60)])  # per process too
        assert isinstance(spare, Held)
        assert spare.spare
        assert ca.spare.counters.claimed == {"k:ops:tokens": 60}
        await ca.unclaim(spare)
        assert ca.spare.counters.claimed == {}
        await a.close()

    asyncio.run(scenario())


def test_tokens_held_by_requests_in_flight_count_for_the_host_until_done_or_their_worker_dies(
    server: SlotServer,
) -> None:
    tokens = Budget("k:t", 0, 100, 0)

    async def scenario() -> None:
        a, b = await client(server), await client(server)
        ca, cb = a.caller_counters(), b.caller_counters()
        assert await ca.reserve([tokens], 60) == 60
        assert await cb.reserve([tokens], 60) == 40  # 60 held: b is given what the 100 leave
        refused = await ca.take([tokens], 60)  # all 100 held
        assert refused is not None
        assert refused.limit == "tokens_per_minute"
        await cb.done([tokens], 10, 40)  # b's request used 10 of its 40
        await until(lambda: server.counters.held["k:t"] == 60, "b's hold to be settled")
        assert server.counters.tokens["k:t"] == 10
        await a.close()  # a dies with its 60 held: they are released
        await until(lambda: server.counters.held["k:t"] == 0, "a's hold to come back")
        assert await cb.take([tokens], 60) is None
        await cb.done([tokens], 0, 60)
        await b.close()

    asyncio.run(scenario())


def test_a_model_the_slot_file_has_no_room_for_goes_by_the_socket_under_the_same_limits(
    server: SlotServer,
) -> None:
    long = "hf.co/" + "q" * 120  # past what an entry of the file holds
    worker_limit = {"box": WorkerLimits("box", "local", None, {}, 2, {}, (), max_waiting=1, max_wait_s=60.0)}

    async def scenario() -> None:
        a, b = await client(server), await client(server)
        for backend in (a, b):
            backend.configure(worker_limit)
        by_socket = await a.acquire("box", long, 1, wait=False)  # the server counts it, in its own row
        assert by_socket is not None
        assert await b.acquire("box", long, 1, wait=False) is None  # its model limit holds for b
        in_file = await b.acquire("box", "m", 2, wait=False)  # a short name: taken in the file
        assert in_file is not None
        assert await a.acquire("box", "x", 2, wait=False) is None  # 2 of 2: both kinds count
        report = (await a.report())["box"]
        assert (report.in_use, dict(report.per_model)) == (2, {long: 1, "m": 1})
        assert (a.local("box").in_use, dict(b.local("box").per_model)) == (1, {"m": 1})  # the metrics' shares
        await by_socket.release()
        await in_file.release()
        await until(lambda: server.table.pools["box"].held() == (0, {}), "both back")
        await a.close()
        await b.close()

    asyncio.run(scenario())
