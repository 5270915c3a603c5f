"""The usage ledger on real stores (a SQLite file, a real PostgreSQL): balances in memory, batches
persisted by the writer, failures kept for the next flush, other processes' debits read back, the
month's window, and the tallies of answers with and without usage. Clocks are injected."""

from __future__ import annotations

import asyncio
import calendar
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.books.estimate import Needs
from interlock.runtime.usage import STORES, open_store, store_url
from interlock.runtime.usage.base import RowKey, Store, Tally, UsageStoreError
from interlock.runtime.usage.ledger import Ledger, LedgerSettings
from interlock.runtime.usage.memory import MemoryStore
from interlock.runtime.usage.metering import Counted, answer_text, delta_chars, reported, tally_of
from interlock.runtime.usage.postgres import PostgresStore, shown_url
from tests.postgres_server import PostgresServer

DEC_1 = calendar.timegm((2026, 12, 1, 10, 0, 0))
ONE = Tally(1, 10, 5, 0, 0)
ALICE = ("team-a", "key-1")


class Wall:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def sqlite(tmp_path: Path) -> Store:
    return open_store(f"sqlite:{tmp_path / 'usage.db'}")


def test_every_scheme_of_the_table_opens_and_an_unknown_one_is_named() -> None:
    assert set(STORES) == {"memory", "sqlite", "postgresql", "postgres"}
    with pytest.raises(ValueError, match=r"^unknown usage store 'mysql:' \(known: memory:, sqlite:, "):
        open_store("mysql://x")
    with pytest.raises(ValueError, match=r"^sqlite: needs a file path"):
        open_store("sqlite:")
    assert isinstance(open_store("postgres://u:pw@db:5433/usage"), PostgresStore)


def test_the_default_store_is_sqlite_under_the_state_dir_else_memory() -> None:
    assert store_url(None, "/var/lib/interlock") == "sqlite:/var/lib/interlock/usage.db"
    assert store_url(None, None) == "memory:"
    assert store_url("postgresql://db/x", "/var/lib/interlock") == "postgresql://db/x"
    assert open_store("sqlite:///var/x.db").shown == "sqlite:/var/x.db"  # type: ignore[attr-defined]


def test_a_postgres_url_is_shown_without_user_or_password() -> None:
    assert shown_url("postgresql://admin:s3cret-PW@db.internal:6432/usage?sslmode=require") == (
        "postgresql://db.internal:6432/usage"
    )


def test_debits_are_balances_at_once_and_rows_after_a_flush(tmp_path: Path) -> None:
    async def scenario() -> None:
        ledger = Ledger(sqlite(tmp_path), LedgerSettings(flush_debits=1000), wall=Wall(DEC_1))
        await ledger.store.open()
        ledger.debit(ALICE, "cloud/gpt", ONE)
        ledger.debit(ALICE, "cloud/gpt", ONE)
        ledger.debit(("team-a", "key-2"), "box/qwen", Tally(1, 1, 1, 7, 1))
        assert ledger.spent(ALICE) == Tally(2, 20, 10, 0, 0)
        assert ledger.tenant_spent("team-a") == Tally(3, 21, 11, 7, 1)
        assert ledger.spent(("team-b", "k")) == Tally()
        assert ledger.waiting == 3
        assert await ledger.store.rows(None, None) == []  # nothing persisted before the writer runs
        assert await ledger.flush()
        assert ledger.waiting == 0
        assert await ledger.store.rows(None, "team-a") == [
            (("2026-12-01", "team-a", "key-1", "cloud/gpt"), Tally(2, 20, 10, 0, 0)),
            (("2026-12-01", "team-a", "key-2", "box/qwen"), Tally(1, 1, 1, 7, 1)),
        ]
        await ledger.close()

    run(scenario())


def test_the_writer_commits_as_soon_as_a_batch_is_full(tmp_path: Path) -> None:
    async def scenario() -> None:
        # an interval that never comes: only a full batch wakes the writer
        ledger = Ledger(sqlite(tmp_path), LedgerSettings(flush_s=3600, flush_debits=3), wall=Wall(DEC_1))
        await ledger.start()
        for _ in range(3):
            ledger.debit(ALICE, "cloud/gpt", ONE)
        while ledger.flushes == 0:  # noqa: ASYNC110 (waiting on the writer's state, not on an event)
            await asyncio.sleep(0.005)
        ledger.debit(ALICE, "cloud/gpt", ONE)
        for _ in range(20):  # the writer gets every chance to run: one debit is not a batch
            await asyncio.sleep(0)
        assert ledger.waiting == 1
        assert (await _rows(tmp_path))[0][1].requests == 3
        await ledger.close()  # the last debit is committed on a clean stop
        reopened = sqlite(tmp_path)
        await reopened.open()
        assert (await reopened.spent("2026-12-01"))[ALICE].requests == 4
        await reopened.close()

    run(scenario())


def test_a_failed_flush_keeps_its_debits_for_the_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        store = sqlite(tmp_path)
        ledger = Ledger(store, wall=Wall(DEC_1))
        ledger.debit(ALICE, "cloud/gpt", ONE)  # the store is not open: the flush fails
        assert not await ledger.flush()
        ledger.debit(ALICE, "cloud/gpt", ONE)
        assert not await ledger.flush()
        assert ledger.failures == 2
        assert ledger.waiting == 2
        await store.open()
        assert await ledger.flush()
        assert ledger.last_error is None
        assert await store.rows(None, None) == [
            (("2026-12-01", "team-a", "key-1", "cloud/gpt"), Tally(2, 20, 10, 0, 0))
        ]
        await store.close()

    run(scenario())
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1  # once per failing streak
    assert errors[0].startswith(f"usage ledger: sqlite:{tmp_path / 'usage.db'}: the usage ledger is not open")


class DownStore(Store):
    """A store that is open but whose writes fail, counting each try."""

    shown = "down:"

    def __init__(self) -> None:
        self.tries = 0

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def add(self, rows: object, batch: str | None = None) -> None:
        self.tries += 1
        raise UsageStoreError("down: the database is away")

    async def spent(self, window: str) -> dict:  # type: ignore[type-arg]
        return {}

    async def rows(self, since: object, until: object) -> list:  # type: ignore[type-arg]
        return []


def test_the_writer_backs_off_while_the_store_fails_instead_of_retrying_every_debit() -> None:
    """A full batch wakes the writer, but not while it backs off: 1 s, then 2 s, ... (the wall clock
    is injected and stands still, so real time passing changes nothing)."""

    async def scenario() -> None:
        store, wall = DownStore(), Wall(DEC_1)
        ledger = Ledger(store, LedgerSettings(flush_s=1.0, flush_debits=4), wall=wall)
        await ledger.start()

        async def debits(count: int) -> None:
            for _ in range(count):
                ledger.debit(ALICE, "cloud/gpt", ONE)
                await asyncio.sleep(0)

        async def tries(expected: int) -> None:
            while store.tries < expected:  # noqa: ASYNC110 (waiting on the writer's state)
                await asyncio.sleep(0.005)
            for _ in range(20):  # and no more than that
                await asyncio.sleep(0)
            assert store.tries == expected

        await debits(4)
        await tries(1)
        await debits(300)  # 304 waiting: each debit once retried the store
        await tries(1)
        wall.now += 1.0  # the first backoff is over: the next debit wakes the writer
        await debits(1)
        await tries(2)
        wall.now += 1.0  # the second one is 2 s
        await debits(1)
        await tries(2)
        wall.now += 1.0
        await debits(1)
        await tries(3)
        assert ledger.waiting == 307
        assert ledger.failures == 3
        await ledger.close()  # a clean stop tries once more, and keeps nothing from failing
        assert store.tries >= 4

    run(scenario())


class Reads(MemoryStore):
    """A ``memory:`` store that counts the ledger's reads of its sums."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def spent(self, since_day: str) -> dict[tuple[str, str], Tally]:
        self.reads += 1
        return await super().spent(since_day)


class SharedReads(Reads):
    shared = True  # as a SQLite file or PostgreSQL: other processes may add to it


def test_an_idle_writer_reads_back_a_shared_store_only() -> None:
    async def scenario() -> None:
        alone, shared = Reads(), SharedReads()
        settings = LedgerSettings(flush_s=0.01, refresh_s=0.02)
        ledgers = [Ledger(alone, settings), Ledger(shared, settings)]
        for ledger in ledgers:
            await ledger.start()  # one read: the window's balances
        await asyncio.sleep(0.3)
        assert alone.reads == 1  # no other process adds to it: nothing to read back
        assert shared.reads >= 4  # other processes' debits, read back while this one is idle
        for ledger in ledgers:
            await ledger.close()

    run(scenario())


def test_the_first_debit_wakes_a_sleeping_writer_which_commits_it_flush_s_later() -> None:
    async def scenario() -> None:
        store = Reads()
        ledger = Ledger(store, LedgerSettings(flush_s=0.5, flush_debits=100))
        await ledger.start()
        await asyncio.sleep(0.1)  # nothing waits: the writer sleeps, with no timeout
        ledger.debit(ALICE, "cloud/gpt", ONE)
        for _ in range(20):
            await asyncio.sleep(0)
        assert (ledger.waiting, ledger.flushes) == (1, 0)  # not at once: flush_s after it
        for _ in range(400):
            if ledger.flushes:
                break
            await asyncio.sleep(0.01)
        assert (ledger.waiting, ledger.flushes) == (0, 1)
        assert [tally.requests for _, tally in await store.rows(None, None)] == [1]
        await ledger.close()

    run(scenario())


class Held(MemoryStore):
    """A store whose commits wait until the test lets them through."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def add(self, rows: Mapping[RowKey, Tally], batch: str | None = None) -> None:
        self.entered.set()
        await self.go.wait()
        await super().add(rows, batch)


def test_a_flush_called_while_the_writer_commits_returns_once_that_commit_is_in() -> None:
    """The writer's commit is in flight when the caller flushes (no debit is left to hand over): the
    caller's flush waits for it, so what was debited before the call is in the store when it returns
    (it returned at once, and a replica reading the store then missed those debits)."""

    async def scenario() -> None:
        store = Held()
        ledger = Ledger(store, LedgerSettings(flush_s=0.0, flush_debits=100))
        await ledger.start()
        ledger.debit(ALICE, "cloud/gpt", ONE)
        await store.entered.wait()  # the writer's flush holds the debit, its commit not done
        flushed = asyncio.ensure_future(ledger.flush())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not flushed.done()
        store.go.set()
        assert await flushed
        assert [tally.requests for _, tally in await store.rows(None, None)] == [1]
        await ledger.close()

    run(scenario())


def test_a_store_that_cannot_be_opened_stops_the_start(tmp_path: Path) -> None:
    folder = tmp_path / "not-a-folder"
    folder.write_text("")
    ledger = Ledger(open_store(f"sqlite:{folder / 'usage.db'}"))
    with pytest.raises(
        UsageStoreError, match=r"^sqlite:.*/not-a-folder/usage.db: cannot open the usage ledger: "
    ):
        run(ledger.start())


def test_a_refresh_adds_other_processes_debits_to_this_ones_waiting_debits(tmp_path: Path) -> None:
    async def scenario() -> None:
        one = Ledger(sqlite(tmp_path), wall=Wall(DEC_1))
        two = Ledger(sqlite(tmp_path), wall=Wall(DEC_1))  # another worker on the same file
        await one.store.open()
        await two.store.open()
        two.debit(ALICE, "cloud/gpt", ONE)
        two.debit(ALICE, "cloud/gpt", ONE)
        await two.flush()
        one.debit(ALICE, "box/qwen", ONE)  # not flushed yet
        await one.refresh()
        assert one.spent(ALICE).requests == 3
        assert one.tenant_spent("team-a").requests == 3
        await one.close()
        await two.close()

    run(scenario())


def test_balances_start_again_in_a_new_month_and_rows_are_per_day(tmp_path: Path) -> None:
    async def scenario() -> None:
        wall = Wall(calendar.timegm((2026, 11, 30, 23, 59, 0)))
        ledger = Ledger(sqlite(tmp_path), wall=wall)
        await ledger.start()
        ledger.debit(ALICE, "cloud/gpt", ONE)
        assert ledger.window == "2026-11-01"
        wall.now = DEC_1
        ledger.debit(ALICE, "cloud/gpt", ONE)
        assert ledger.window == "2026-12-01"
        assert ledger.spent(ALICE).requests == 1
        await ledger.close()
        rows = await _rows(tmp_path)
        assert [key[0] for key, _ in rows] == ["2026-11-30", "2026-12-01"]
        again = Ledger(sqlite(tmp_path), wall=wall)
        await again.start()  # a restart reads the month's balance back
        assert again.spent(ALICE).requests == 1
        await again.close()

    run(scenario())


async def _rows(tmp_path: Path) -> list[tuple[tuple[str, str, str, str], Tally]]:
    store = sqlite(tmp_path)
    await store.open()
    try:
        return await store.rows(None, None)
    finally:
        await store.close()


def test_the_postgres_store_adds_batches_from_two_replicas(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database()

    async def scenario() -> None:
        one, two = Ledger(open_store(url), wall=Wall(DEC_1)), Ledger(open_store(url), wall=Wall(DEC_1))
        await one.start()
        await two.start()
        one.debit(ALICE, "cloud/gpt", ONE)
        two.debit(ALICE, "cloud/gpt", ONE)
        two.debit(("team-b", "key-9"), "cloud/gpt", Tally(1, 3, 4, 5, 1))
        await one.flush()
        await two.flush()
        await one.refresh()
        assert one.spent(ALICE) == Tally(2, 20, 10, 0, 0)
        assert one.tenant_spent("team-b") == Tally(1, 3, 4, 5, 1)
        assert await one.store.rows("2026-12-01", "team-b") == [
            (("2026-12-01", "team-b", "key-9", "cloud/gpt"), Tally(1, 3, 4, 5, 1))
        ]
        await one.close()
        await two.close()

    run(scenario())


def test_a_postgres_that_goes_down_and_comes_back_loses_nothing_and_holds_rows_not_debits() -> None:
    """A real PostgreSQL stopped under the writer (its connection cut), 3,000 debits while it is down,
    then started again on the same port and data: the writer backs off (each wait twice the last, so
    far fewer tries than debits), keeps one tally per row whatever the number of debits (memory bounded
    by accounts x models x days), reconnects by itself and commits every debit once."""
    server = PostgresServer().start()
    accounts = [ALICE, ("team-a", "key-2"), ("team-b", "key-9")]
    models = ["cloud/gpt", "local/llama"]

    async def until(check: Callable[[], bool], what: str) -> None:
        for _ in range(3000):  # waiting on the writer's state, 30 s at most
            if check():
                return
            await asyncio.sleep(0.01)
        pytest.fail(f"timed out waiting for {what}")

    async def scenario() -> None:
        ledger = Ledger(
            open_store(server.new_database()), LedgerSettings(flush_s=0.05, flush_debits=16, refresh_s=3600)
        )
        await ledger.start()
        for n in range(6):
            ledger.debit(accounts[n % 3], models[n % 2], ONE)
        await until(lambda: ledger.flushes == 1, "the first batch to be committed")
        server.pause()
        for n in range(3000):
            ledger.debit(accounts[n % 3], models[n % 2], ONE)
            if n % 100 == 0:
                await asyncio.sleep(0)
            assert len(ledger._debits) < 16  # not folded yet: never a batch, whatever the writer does
        await until(lambda: ledger.failures >= 4, "four failed tries")
        assert ledger.waiting == 3000
        assert len(ledger._pending) == 6  # one tally per (day, tenant, key, model), not per debit
        assert ledger.failures < 3000 // 16  # not a try per full batch: it backs off
        assert ledger.last_error is not None
        assert ledger.last_error.startswith(f"{ledger.store.shown}: ")
        server.resume()
        await until(lambda: ledger.waiting == 0, "the writer to commit after the store came back")
        assert ledger.waiting == 0
        assert ledger.last_error is None
        rows = dict(await ledger.store.rows(None, None))
        assert sum(t.requests for t in rows.values()) == 3006
        assert sum(t.prompt_tokens for t in rows.values()) == 3006 * 10
        await ledger.close()

    try:
        run(scenario())
    finally:
        server.stop()


def test_an_unreachable_postgres_is_an_error_naming_the_store_without_its_password() -> None:
    from tests.redis_server import free_port

    store = open_store(f"postgresql://admin:pw-SECRET-9@127.0.0.1:{free_port()}/usage")
    with pytest.raises(UsageStoreError) as caught:
        run(store.open())
    assert str(caught.value).startswith(f"{store.shown}: cannot connect: ")
    assert "pw-SECRET-9" not in str(caught.value)


NEEDS = Needs(frozenset({"completion"}), 40, 12, 0, 20, None, "none")


def test_a_reported_usage_is_taken_and_a_missing_one_is_estimated() -> None:
    assert reported({"prompt_tokens": 7, "completion_tokens": 3}) == Counted(7, 3, False)
    assert reported({"prompt_tokens": 7}) == Counted(7, 0, False)  # an embedding
    assert reported({"total_tokens": 9}) is None
    assert reported(None) is None
    assert tally_of((7, 3), NEEDS, 99, (2.0, 10.0)) == Tally(1, 7, 3, 44, 0)
    assert tally_of(None, NEEDS, 9, None) == Tally(1, 12, 9, 0, 1)
    answer = {"choices": [{"message": {"content": "abc", "reasoning": "de"}}]}
    assert answer_text(answer) == "abcde"
    assert answer_text({"choices": []}) == ""
    assert delta_chars({"choices": [{"delta": {"content": "héllo"}}]}) == 5
    assert delta_chars({"choices": [], "usage": {}}) == 0
    assert delta_chars({"choices": [{"delta": {"content": "ab", "reasoning_content": "cde"}}]}) == 5
    assert delta_chars({"choices": [{"delta": {"reasoning": "xy", "content": None}}]}) == 2
    assert delta_chars({"choices": [{"delta": {"role": "assistant", "tool_calls": []}}]}) == 0


@pytest.mark.parametrize(
    ("delta", "chars"),
    [
        ({"content": "abc"}, 3),
        ({"role": "assistant", "content": ""}, 0),
        ({"content": "abc", "reasoning": "de"}, 5),
        ({"reasoning_content": "de"}, 2),
        ({"content": None, "reasoning": "de", "reasoning_content": "f"}, 3),
        ({"content": 7, "reasoning": "de"}, 2),
        ({"tool_calls": [{"function": {"arguments": "{}"}}]}, 0),
        ({}, 0),
        ("abc", 0),
    ],
)
def test_a_stream_chunk_counts_the_text_and_reasoning_of_its_first_choice(delta: Any, chars: int) -> None:
    assert delta_chars({"choices": [{"index": 0, "delta": delta}, {"delta": {"content": "xyz"}}]}) == chars
