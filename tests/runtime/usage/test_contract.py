"""What every usage store promises, run on each one: ``memory:``, a SQLite file and a real PostgreSQL.

Stores are the ledger's seam (``runtime/usage/base.py``): adding batches to rows, the sums per account
of a budget window, rows listed by day and tenant, and closing twice. Whether a store shares its rows
with another process (SQLite's file, PostgreSQL's table; not memory) is a property of the store, tested
where it holds; the ledger's batching and balances are ``test_ledger.py``'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock.runtime.usage import STORES, open_store
from interlock.runtime.usage.base import Store, Tally
from tests.postgres_server import PostgresServer

DAY_1, DAY_2 = ("2026-12-01", "team-a", "key-1", "cloud/gpt"), ("2026-12-02", "team-a", "key-1", "cloud/gpt")
OTHER = ("2026-12-02", "team-b", "key-9", "box/qwen")
ONE = Tally(1, 10, 5, 7, 0)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store of this test's own, empty."""
    if request.param == "memory":
        yield "memory:"
    elif request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'usage.db'}"
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        yield server.new_database()


def test_the_suite_covers_every_store_of_the_table() -> None:
    assert STORES
    assert set(STORES) - {"postgres"} == {"memory", "sqlite", "postgresql"}  # postgres: an alias


def test_batches_add_up_in_their_rows(store_url: str) -> None:
    async def scenario() -> None:
        store: Store = open_store(store_url)
        await store.open()
        await store.add({DAY_1: ONE, DAY_2: ONE})
        await store.add({DAY_2: Tally(1, 1, 1, 1, 1), OTHER: ONE})
        assert await store.rows(None, None) == [
            (DAY_1, ONE),
            (DAY_2, Tally(2, 11, 6, 8, 1)),
            (OTHER, ONE),
        ]
        assert await store.rows("2026-12-02", "team-a") == [(DAY_2, Tally(2, 11, 6, 8, 1))]
        assert await store.rows(None, "team-c") == []
        await store.close()
        await store.close()  # idempotent

    asyncio.run(scenario())


def test_a_window_sums_each_account_from_its_first_day(store_url: str) -> None:
    async def scenario() -> None:
        store = open_store(store_url)
        await store.open()
        assert await store.spent("2026-12-01") == {}
        await store.add({DAY_1: ONE, DAY_2: ONE, OTHER: Tally(1, 2, 3, 4, 1)})
        assert await store.spent("2026-12-01") == {
            ("team-a", "key-1"): Tally(2, 20, 10, 14, 0),
            ("team-b", "key-9"): Tally(1, 2, 3, 4, 1),
        }
        assert await store.spent("2026-12-02") == {
            ("team-a", "key-1"): ONE,
            ("team-b", "key-9"): Tally(1, 2, 3, 4, 1),
        }
        await store.close()

    asyncio.run(scenario())


def test_what_is_shown_names_the_kind_and_never_a_password(store_url: str) -> None:
    store = open_store(store_url)
    assert store.kind == store_url.partition(":")[0]
    assert "@" not in store.shown
    assert "password" not in store.shown
