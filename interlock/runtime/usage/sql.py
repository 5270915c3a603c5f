"""What both SQL usage stores share (``SqlStore``: the table, its statements, the reading of its rows);
imported by ``sqlite.py`` and ``postgres.py`` only."""

from __future__ import annotations

import abc
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from interlock.runtime.usage.base import Account, RowKey, Store, Tally

TABLE = "interlock_usage"
BATCHES = "interlock_usage_batches"
"""The ids of the batches committed in the last ``BATCHES_KEPT_S`` (time-ordered: ``batch_id``)."""

BATCHES_KEPT_S = 7 * 86400
"""How long a committed batch's id is kept: a replay of a batch older than this would count it twice
(a writer retries an unanswered commit as soon as the store answers again)."""


def batches_cutoff(now: float) -> str:
    """Batch ids below this are older than ``BATCHES_KEPT_S``: pruned."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now - BATCHES_KEPT_S))


COUNTERS = ("requests", "prompt_tokens", "completion_tokens", "cost_micros", "estimated")


CREATE_TABLE = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    day TEXT NOT NULL,
    tenant TEXT NOT NULL,
    key_id TEXT NOT NULL,
    model TEXT NOT NULL,
    {", ".join(f"{name} BIGINT NOT NULL DEFAULT 0" for name in COUNTERS)},
    PRIMARY KEY (day, tenant, key_id, model)
)"""


CREATE_BATCHES = f"CREATE TABLE IF NOT EXISTS {BATCHES} (id TEXT PRIMARY KEY)"


def claim_sql(mark: str) -> str:
    """Record a batch's id; no row inserted: the batch is in already."""
    return f"INSERT INTO {BATCHES} (id) VALUES ({mark}) ON CONFLICT (id) DO NOTHING"


def prune_sql(mark: str) -> str:
    return f"DELETE FROM {BATCHES} WHERE id < {mark}"


def upsert_sql(mark: str) -> str:
    """Add one tally to its row; ``mark`` is the driver's placeholder (``?`` or ``%s``)."""
    marks = ", ".join([mark] * (4 + len(COUNTERS)))
    added = ", ".join(f"{name} = {TABLE}.{name} + excluded.{name}" for name in COUNTERS)
    return (
        f"INSERT INTO {TABLE} (day, tenant, key_id, model, {', '.join(COUNTERS)}) VALUES ({marks}) "
        f"ON CONFLICT (day, tenant, key_id, model) DO UPDATE SET {added}"
    )


def spent_sql(mark: str) -> str:
    sums = ", ".join(f"SUM({name})" for name in COUNTERS)
    return f"SELECT tenant, key_id, {sums} FROM {TABLE} WHERE day >= {mark} GROUP BY tenant, key_id"


def rows_sql(mark: str, since: bool, tenant: bool) -> str:
    where = [f"day >= {mark}"] if since else []
    if tenant:
        where.append(f"tenant = {mark}")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return (
        f"SELECT day, tenant, key_id, model, {', '.join(COUNTERS)} FROM {TABLE}{clause} "
        "ORDER BY day, tenant, key_id, model"
    )


def row_values(key: RowKey, tally: Tally) -> tuple[str | int, ...]:
    return (*key, *(getattr(tally, name) for name in COUNTERS))


class SqlStore(Store):
    """The ledger in one SQL table: the statements and the reading of rows; a driver runs them (``write``,
    ``query``) with its placeholder, ``mark``."""

    mark: ClassVar[str]  # ``?`` (sqlite3), ``%s`` (psycopg)
    upsert: ClassVar[str]
    spent_by_account: ClassVar[str]
    claim: ClassVar[str]
    prune: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.upsert, cls.spent_by_account = upsert_sql(cls.mark), spent_sql(cls.mark)
        cls.claim, cls.prune = claim_sql(cls.mark), prune_sql(cls.mark)

    @abc.abstractmethod
    async def write(self, values: list[tuple[str | int, ...]], batch: str | None) -> None:
        """In one transaction: record ``batch`` (``claim``; when it was recorded already, nothing more),
        run ``upsert`` once for each of ``values``, prune the batch ids older than ``batches_cutoff``."""

    @abc.abstractmethod
    async def query(self, sql: str, args: tuple[str, ...]) -> list[tuple[Any, ...]]:
        """The rows ``sql`` selects."""

    async def add(self, rows: Mapping[RowKey, Tally], batch: str | None = None) -> None:
        await self.write([row_values(key, tally) for key, tally in rows.items()], batch)

    async def spent(self, since_day: str) -> dict[Account, Tally]:
        found = await self.query(self.spent_by_account, (since_day,))
        return {(r[0], r[1]): Tally(*(int(v or 0) for v in r[2:])) for r in found}

    async def rows(self, since_day: str | None, tenant: str | None) -> list[tuple[RowKey, Tally]]:
        sql = rows_sql(self.mark, since_day is not None, tenant is not None)
        args = tuple(v for v in (since_day, tenant) if v is not None)
        found = await self.query(sql, args)
        return [((r[0], r[1], r[2], r[3]), Tally(*(int(v) for v in r[4:]))) for r in found]
