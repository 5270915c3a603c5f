"""The usage store seam's types: the counters, the ``Store`` a backend implements, and what both SQL
stores share (``SqlStore``: the table, its statements, the reading of its rows)."""

from __future__ import annotations

import abc
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from interlock.runtime.base.mypyc_marks import mypyc_attr

Account = tuple[str, str]
"""(tenant, key id): who a budget belongs to."""


RowKey = tuple[str, str, str, str]
"""(day ``YYYY-MM-DD`` UTC, tenant, key id, model): one counter row of the ledger."""


class UsageStoreError(Exception):
    """The store could not be opened, written or read; the message names the store, never a password.
    Whether a write that raised it took effect is not known (its reply may be what was lost)."""


class UsageRowsRefused(UsageStoreError):
    """The store works but refused the values of a batch (a number out of its range): the batch is
    known not to be in (its transaction was rolled back), and sending it again will not help."""


@dataclass(slots=True)
class Tally:
    """Counters of one row, or a sum of rows."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_micros: int = 0  # millionths of the plan's currency
    estimated: int = 0  # requests whose tokens the gateway estimated (the upstream reported none)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Tally) -> None:
        self.requests += other.requests
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_micros += other.cost_micros
        self.estimated += other.estimated

    def copy(self) -> Tally:
        return Tally(
            self.requests, self.prompt_tokens, self.completion_tokens, self.cost_micros, self.estimated
        )


@mypyc_attr(allow_interpreted_subclasses=True)  # test doubles subclass it (runtime/base/mypyc_marks.py)
class Store(abc.ABC):
    """Where debits are persisted. Used by one writer task at a time (no call overlaps another)."""

    shown: str  # the store as logs and errors name it: no password
    shared: ClassVar[bool] = True
    """Other processes may add to it (workers, replicas): the ledger reads its sums back periodically."""

    @property
    def kind(self) -> str:
        """``memory``, ``sqlite`` or ``postgresql``: what pages show (no path, host or URL)."""
        return self.shown.partition(":")[0]

    def missing(self) -> str | None:
        """Why there is plainly no ledger to read (a report must not create one), else None."""
        return None

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect, and create the table when it is missing."""

    @abc.abstractmethod
    async def add(self, rows: Mapping[RowKey, Tally], batch: str | None = None) -> None:
        """Add each tally to its row (created at zero when missing), all in one transaction. A ``batch``
        id makes it idempotent: a batch whose id the store has already recorded is not added again (the
        id is recorded in the same transaction), so a commit whose reply was lost can be sent again."""

    @abc.abstractmethod
    async def spent(self, since_day: str) -> dict[Account, Tally]:
        """The sums per account of the rows from ``since_day`` on (a budget window's balance)."""

    @abc.abstractmethod
    async def rows(self, since_day: str | None, tenant: str | None) -> list[tuple[RowKey, Tally]]:
        """The rows from ``since_day`` on (all when None), of ``tenant`` only when given; sorted."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Let go of the connection (idempotent)."""


TABLE = "interlock_usage"
BATCHES = "interlock_usage_batches"
"""The ids of the batches committed in the last ``BATCHES_KEPT_S`` (time-ordered: ``batch_id``)."""

BATCHES_KEPT_S = 7 * 86400
"""How long a committed batch's id is kept: a replay of a batch older than this would count it twice
(a writer retries an unanswered commit as soon as the store answers again)."""


def batch_id(now: float) -> str:
    """A new batch's id: its UTC time first (so ids sort by age and old ones are pruned by a range of
    the primary key), then 128 random bits."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + "/" + uuid.uuid4().hex


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
