"""The usage store seam's types: the counters and the ``Store`` a backend implements (what both SQL stores
share, the table and its statements, is ``sql.py``, imported by them only)."""

from __future__ import annotations

import abc
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

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


def batch_id(now: float) -> str:
    """A new batch's id: its UTC time first (so ids sort by age and old ones are pruned by a range of
    the primary key), then 128 random bits."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + "/" + uuid.uuid4().hex
