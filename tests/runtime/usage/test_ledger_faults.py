"""The usage ledger against hostile numbers and lost replies, on a real SQLite file and a real PostgreSQL
(issue 39, items 1 and 10).

- An upstream's count is cut to ``MAX_REPORTED_TOKENS`` where it enters (``metering.reported``).
- A row the store cannot hold (a sum past 64 bits, as a ledger fed before the bound could make) costs its
  own debits only: the other rows of its batch and every later batch commit; the failure is counted and
  the clean stop that follows loses nothing else.
- A COMMIT whose reply is lost (a proxy passes the COMMIT to PostgreSQL, then cuts the connection before
  the answer comes back) is sent again under the same batch id: the store adds it once.
"""

from __future__ import annotations

import asyncio
import calendar
import socket
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from interlock.runtime.usage import open_store
from interlock.runtime.usage.base import RowKey, Tally
from interlock.runtime.usage.ledger import Ledger, LedgerSettings
from interlock.runtime.usage.memory import MemoryStore
from interlock.runtime.usage.metering import MAX_REPORTED_TOKENS, Counted, reported
from tests.postgres_server import PostgresServer

DEC_1 = calendar.timegm((2026, 12, 1, 10, 0, 0))
ONE = Tally(1, 10, 5, 0, 0)
GOOD, OTHER, EVIL = ("good", "key-1"), ("other", "key-2"), ("evil", "key-9")


def wall() -> float:
    return DEC_1


def test_an_upstreams_absurd_count_is_cut_where_it_enters() -> None:
    assert reported({"prompt_tokens": 2**64 - 1, "completion_tokens": 3}) == Counted(
        MAX_REPORTED_TOKENS, 3, True
    )
    assert reported({"prompt_tokens": 5, "completion_tokens": 2**63 - 1}) == Counted(
        5, MAX_REPORTED_TOKENS, True
    )
    assert reported({"prompt_tokens": MAX_REPORTED_TOKENS, "completion_tokens": 0}) == Counted(
        MAX_REPORTED_TOKENS, 0, False
    )
    assert reported({"prompt_tokens": -(2**70), "completion_tokens": 1}) == Counted(0, 1, False)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'usage.db'}"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.new_database()


def test_a_row_the_store_refuses_costs_its_own_debits_and_never_blocks_the_others(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        ledger = Ledger(open_store(store_url), LedgerSettings(flush_s=3600, refresh_s=3600), wall=wall)
        await ledger.start()
        ledger.debit(GOOD, "cloud/gpt", ONE)
        ledger.debit(EVIL, "huge/evil", Tally(1, 2**63 - 1, 0, 0, 0))
        ledger.debit(EVIL, "huge/evil", Tally(1, 2**63 - 1, 0, 0, 0))  # the sum is past 64 bits
        ledger.debit(OTHER, "cloud/gpt", ONE)
        assert await ledger.flush()  # what could be committed was
        assert (ledger.dropped_rows, ledger.failures, ledger.waiting) == (1, 1, 0)
        assert ledger.last_error is not None
        assert "refused" in ledger.last_error
        rows = {key[1]: tally for key, tally in await ledger.store.rows(None, None)}
        assert rows == {"good": ONE, "other": ONE}
        for _ in range(3):  # later debits commit as before, in one batch
            ledger.debit(GOOD, "cloud/gpt", ONE)
        assert await ledger.flush()
        assert ledger.last_error is None
        ledger.debit(OTHER, "cloud/gpt", ONE)
        await ledger.close()  # the clean stop commits the rest
        rows = {key[1]: tally for key, tally in await reopened(store_url)}
        assert rows == {"good": Tally(4, 40, 20, 0, 0), "other": Tally(2, 20, 10, 0, 0)}

    asyncio.run(scenario())
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 1
    assert "2 requests of evil on 2026-12-01" in dropped[0]


async def reopened(url: str) -> list[tuple[tuple[str, str, str, str], Tally]]:
    store = open_store(url)
    await store.open()
    try:
        return await store.rows(None, None)
    finally:
        await store.close()


def test_a_batch_sent_again_under_its_id_is_added_once(store_url: str) -> None:
    async def scenario() -> None:
        store = open_store(store_url)
        await store.open()
        row = ("2026-12-01", "good", "key-1", "cloud/gpt")
        await store.add({row: ONE}, "2026-12-01T10:00:00/a")
        await store.add({row: ONE}, "2026-12-01T10:00:00/a")  # its reply was lost: sent again
        await store.add({row: ONE}, "2026-12-01T10:00:01/b")
        assert await store.rows(None, None) == [(row, Tally(2, 20, 10, 0, 0))]
        await store.close()

    asyncio.run(scenario())


class CommitReplyLost:
    """A TCP proxy in front of PostgreSQL that, once armed, passes a client's COMMIT to the server, waits
    for the server's answer and throws it away, cutting both connections: the commit is in, the client
    never hears so."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed = threading.Event()
        self.cut = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, upward: bool) -> None:
        try:
            while data := source.recv(65536):
                if not upward and self.cut.is_set():  # the COMMIT's answer: dropped, both cut
                    self.cut.clear()
                    for end in (source, sink):
                        end.shutdown(socket.SHUT_RDWR)
                    return
                sink.sendall(data)
                if upward and b"COMMIT" in data and self.armed.is_set():
                    self.armed.clear()
                    self.cut.set()
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def lossy(postgres_server: PostgresServer) -> Iterator[tuple[CommitReplyLost, str]]:
    url = postgres_server.new_database()
    proxy = CommitReplyLost(postgres_server.port)
    try:
        yield proxy, url.replace(f":{postgres_server.port}/", f":{proxy.port}/")
    finally:
        proxy.close()


def test_a_commit_whose_reply_is_lost_is_counted_once(lossy: tuple[CommitReplyLost, str]) -> None:
    proxy, url = lossy

    async def scenario() -> None:
        ledger = Ledger(open_store(url), LedgerSettings(flush_s=3600, refresh_s=3600), wall=wall)
        await ledger.start()
        for n in range(20):
            ledger.debit(GOOD if n % 2 else OTHER, "cloud/gpt", ONE)
        proxy.armed.set()
        assert not await ledger.flush()  # the COMMIT went in; its answer never came back
        assert ledger.waiting == 20
        assert ledger.failures == 1
        ledger.debit(GOOD, "cloud/gpt", ONE)  # made while the batch is in doubt
        ledger._retry_at = None  # no back-off wait in a test: flush now
        assert await ledger.flush()
        assert ledger.waiting == 0
        rows = {key[1]: tally.requests for key, tally in await ledger.store.rows(None, None)}
        assert rows == {"good": 11, "other": 10}
        await ledger.close()

    asyncio.run(scenario())


class Broken(MemoryStore):
    """A store whose writes fail with what is not a store error (a bug, an unmapped driver error)."""

    async def add(self, rows: Mapping[RowKey, Tally], batch: str | None = None) -> None:
        raise OverflowError("Python int too large to convert to SQLite INTEGER")


def test_any_failure_of_a_commit_is_counted_and_backed_off(caplog: pytest.LogCaptureFixture) -> None:
    """Before: an exception that was not a ``UsageStoreError`` escaped the flush, was logged by the writer
    every round (no back-off) and counted nowhere."""

    async def scenario() -> None:
        ledger = Ledger(Broken(), LedgerSettings(flush_s=0.5), wall=wall)
        ledger.debit(GOOD, "cloud/gpt", ONE)
        assert not await ledger.flush()
        assert (ledger.failures, ledger.waiting) == (1, 1)
        assert ledger.last_error == "internal: OverflowError"
        assert ledger._retry_at == DEC_1 + 0.5  # backed off like a store that is down
        assert not await ledger.flush()
        assert ledger.failures == 2

    asyncio.run(scenario())
    tracebacks = [r for r in caplog.records if r.exc_info is not None]
    assert len(tracebacks) == 1  # logged once per failing streak, with its traceback
