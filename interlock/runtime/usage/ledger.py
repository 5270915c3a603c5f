"""Balances in memory, debits persisted in batches by one writer task: the request path never waits.

Invariants:
- ``debit`` and ``spent`` are plain in-memory work (no I/O, no await): a request checks its balance and
  is debited in memory; the writer task hands the debits gathered since its last flush to the store.
- A debit is one append to a list (``_debits``, of the current day); the first reader after it
  (``spent``, ``tenant_spent``, a flush, a refresh, a new day) folds the list into the day's rows and
  the balances first, summing the debits of one (account, model) before touching the three tables.
  So every read sees every debit made before it, as if each had been added at once, and a request
  pays for no update of a balance nobody reads before the writer's next round. The list never holds
  more than ``flush_debits`` (the debit that reaches it folds, as when the writer backs off), so the
  memory held while the store is down is one tally per row, not per debit.
- A flush happens ``flush_s`` seconds after the first debit it commits, or as soon as ``flush_debits``
  debits are waiting, whichever comes first; each flush is one transaction. The writer sleeps while
  no debit waits (an idle gateway's writer wakes only to refresh, below). **The crash window**: a
  process killed outright (SIGKILL, OOM) loses the debits not yet committed, which is at most the last
  ``flush_s`` seconds of them (and fewer than ``flush_debits``), plus the ones in a commit that had not
  finished. A clean stop (SIGTERM, SIGINT) flushes everything first.
- A flush that fails keeps its debits for the next one (logged once per failing streak, counted,
  whatever the exception), and the writer backs off: the next try is ``flush_s`` later, then twice as
  long after each failure, at most ``MAX_BACKOFF_S`` (a full batch does not wake it sooner), so a store
  that is down is not retried on every debit.
- **A commit is idempotent across a lost reply.** Each batch has an id (``base.batch_id``) the store
  records in the batch's own transaction. A batch whose commit failed is kept as it was, its id with it
  (``_doubt``: it may be in, its reply lost), and sent again, alone and first, before the debits made
  since: a store that recorded its id adds nothing the second time. So a debit is counted at most once.
- **A batch the store refuses does not block the others.** When the store answers that it cannot take
  a batch's values (``UsageRowsRefused``: rolled back, so known not to be in), the rows go one per
  transaction: each that commits is in, each the store refuses alone is dropped, logged and counted
  (``dropped_rows``, and a failure), so one poisoned row costs its own debits, never another tenant's.
- Every ``refresh_s`` seconds the writer reads the window's sums back from the store and adds the debits
  it has not persisted yet: so the balances include other replicas' (PostgreSQL) or other workers'
  (SQLite, ``--workers N``) debits, at most ``refresh_s + flush_s`` late. A store no other process
  writes (``Store.shared`` false: ``memory:``) is never read back.
- Balances cover the budget window, the calendar month in UTC: at the first debit of a new month they
  start again from zero. Rows are per day, so ``interlock usage --since`` works by day.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TypeVar

from interlock.runtime.usage.base import (
    Account,
    RowKey,
    Store,
    Tally,
    UsageRowsRefused,
    UsageStoreError,
    batch_id,
)

log = logging.getLogger("interlock.usage")

Clock = Callable[[], float]
K = TypeVar("K", bound=Hashable)

ZERO = Tally()  # returned for an account with no debits: read only

MAX_BACKOFF_S = 30.0
"""The longest the writer waits between two tries while the store keeps failing."""


@dataclass(frozen=True, slots=True)
class LedgerSettings:
    flush_s: float = 0.5
    flush_debits: int = 256
    refresh_s: float = 5.0


@dataclass(slots=True)
class Batch:
    """Rows handed to the store in one transaction, under one id, and how many debits they hold."""

    id: str
    rows: dict[RowKey, Tally]
    debits: int


def day_of(epoch: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def window_start(day: str) -> str:
    """The first day of the budget window holding ``day`` (the calendar month)."""
    return day[:8] + "01"


def next_window(start: str) -> str:
    """The first day of the window after the one starting on ``start``."""
    year, month = int(start[:4]), int(start[5:7])
    return f"{year + month // 12:04d}-{month % 12 + 1:02d}-01"


class Ledger:
    """One gateway process's usage: the window's balances per account and per tenant, and the debits
    waiting for the writer."""

    def __init__(self, store: Store, settings: LedgerSettings | None = None, *, wall: Clock = time.time):
        self.store = store
        self.settings = settings or LedgerSettings()
        self._batch = self.settings.flush_debits
        self._wall = wall
        self._spent: dict[Account, Tally] = {}
        self._tenants: dict[str, Tally] = {}
        self._pending: dict[RowKey, Tally] = {}
        self._debits: list[tuple[Account, str, Tally]] = []  # not folded yet: (account, model, usage)
        self._pending_debits = 0  # folded or not
        self._doubt: Batch | None = None  # a batch whose commit failed: maybe in (sent again as is)
        self.dropped_rows = 0  # rows the store refused alone (their debits are lost)
        self._day = ""
        self._day_ends = 0.0
        self.window = ""  # the first day of the current budget window
        self.flushes = 0  # commits that succeeded
        self.failures = 0  # flushes and refreshes that failed
        self.last_error: str | None = None
        self._full = asyncio.Event()
        self._flushing = asyncio.Lock()  # one commit at a time (see flush)
        self._retry_at: float | None = None  # wall clock; None: no failing streak, flush when due
        self._streak = 0  # failures in a row
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._roll(wall())

    # -- the request path ----------------------------------------------------------------------------

    def spent(self, account: Account) -> Tally:
        """What ``account`` (tenant, key id) used in the current window (read only)."""
        if self._debits:
            self._fold()
        return self._spent.get(account, ZERO)

    def tenant_spent(self, tenant: str) -> Tally:
        """What every key of ``tenant`` used in the current window together (read only)."""
        if self._debits:
            self._fold()
        return self._tenants.get(tenant, ZERO)

    def debit(self, account: Account, model: str, usage: Tally) -> None:
        """Count one request's ``usage`` (``requests`` set to 1 by the caller) against ``account``: one
        append, folded by the next reader (the ledger keeps ``usage`` unchanged: it copies on folding)."""
        now = self._wall()
        if now >= self._day_ends:  # the debits so far belong to the day that ended
            self._fold()
            self._roll(now)
        self._debits.append((account, model, usage))
        waiting = self._pending_debits = self._pending_debits + 1
        if waiting >= self._batch:
            if len(self._debits) >= self._batch:  # the writer backs off: hold rows, not debits
                self._fold()
            if self._retry_at is None or now >= self._retry_at:
                self._full.set()
        elif waiting == 1:  # the writer sleeps while nothing waits: its flush is due in flush_s
            self._full.set()

    def _fold(self) -> None:
        """The debits appended since the last fold, into the day's rows and the window's balances."""
        debits, self._debits = self._debits, []
        summed: dict[tuple[Account, str], Tally] = {}
        for account, model, usage in debits:
            _added(summed, (account, model), usage)
        day = self._day
        for (account, model), usage in summed.items():
            tenant, key_id = account
            _added(self._pending, (day, tenant, key_id, model), usage)
            _added(self._spent, account, usage)
            _added(self._tenants, tenant, usage)

    def _roll(self, now: float) -> None:
        """A new day: its row key; a new month: balances start again from zero (the caller folded)."""
        day = day_of(now)
        year, month, mday = (int(part) for part in day.split("-"))
        self._day = day
        self._day_ends = calendar.timegm((year, month, mday, 0, 0, 0)) + 86400.0
        start = window_start(day)
        if start != self.window:
            self.window = start
            self._spent, self._tenants = {}, {}

    # -- the writer ----------------------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        """Debits not yet committed."""
        doubt = self._doubt
        return self._pending_debits + (doubt.debits if doubt is not None else 0)

    async def start(self) -> None:
        """Open the store and read the window's balances (``UsageStoreError`` when it cannot), then
        start the writer task."""
        await self.store.open()
        await self.refresh(strict=True)
        self._full = asyncio.Event()  # this event loop's
        self._flushing = asyncio.Lock()
        self._closing = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name="interlock-usage")

    async def close(self) -> None:
        """Stop the writer after a last flush, then close the store (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            self._closing = True
            self._full.set()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        else:
            await self.flush()
        await self.store.close()

    async def _run(self) -> None:
        settings = self.settings
        refreshes = self.store.shared
        next_refresh = self._wall() + settings.refresh_s
        while not self._closing:
            if not self.waiting:  # idle: until the first debit (or the next refresh)
                idle = max(0.0, next_refresh - self._wall()) if refreshes else None
                await self._woken(idle)
            if self.waiting and not self._closing:
                retry_at = self._retry_at
                if retry_at is not None:  # backing off: a full batch does not wake it sooner
                    await self._woken(max(0.0, retry_at - self._wall()))
                    if self._wall() < retry_at and not self._closing:
                        continue  # woken early by a clean stop only
                elif self._pending_debits < settings.flush_debits:
                    await self._woken(settings.flush_s)  # flush_s after the first waiting debit
            try:
                await self.flush()
                if refreshes and self._wall() >= next_refresh and not self._closing:
                    await self.refresh()
                    next_refresh = self._wall() + settings.refresh_s
            except Exception:  # a bug in one round never ends the writer (the debits stay waiting)
                log.exception("usage ledger: the writer's round failed")
        await self.flush()

    async def _woken(self, seconds: float | None) -> None:
        """Until ``debit`` or ``close`` wakes the writer, or ``seconds`` pass (None: no limit)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._full.wait(), seconds)
        self._full.clear()

    async def flush(self) -> bool:
        """Commit the waiting debits in one transaction; on failure keep them for the next flush. A flush
        called while another is committing waits for it first, so every debit made before the call is
        committed (or kept, on failure) when it returns, whoever's transaction carried it."""
        async with self._flushing:
            return await self._commit()

    async def _commit(self) -> bool:
        """The batch in doubt first (as it was, under its id), then the debits waiting: two commits at
        most, so a flush under a steady stream of debits ends."""
        clean = True  # no batch refused in this flush
        for _ in range(2):
            batch = self._doubt
            if batch is None:
                if self._debits:
                    self._fold()
                if not self._pending:
                    break
                batch = self._doubt = Batch(batch_id(self._wall()), self._pending, self._pending_debits)
                self._pending, self._pending_debits = {}, 0
            try:
                await self.store.add(batch.rows, batch.id)
            except UsageRowsRefused as refused:  # rolled back: not in; the rows one by one
                self._doubt, clean = None, False
                self._refused(refused)
                if not await self._one_by_one(batch):
                    return False
            except Exception as exc:  # the store's error, or a bug: either way the batch is kept
                self._failed(exc)
                return False
            else:
                self._doubt = None
                self.flushes += 1
        if self.last_error is not None and clean:
            log.warning("usage ledger %s: writing again", self.store.shown)
            self.last_error = None
        self._retry_at, self._streak = None, 0
        return True

    async def _one_by_one(self, batch: Batch) -> bool:
        """A refused batch's rows, one transaction each: a row the store refuses alone is dropped (logged,
        counted); when the store fails otherwise, that row is in doubt and the rest wait again."""
        rows = list(batch.rows.items())
        for n, (key, tally) in enumerate(rows):
            single = Batch(batch_id(self._wall()), {key: tally}, tally.requests)
            try:
                await self.store.add(single.rows, single.id)
            except UsageRowsRefused as refused:
                self.dropped_rows += 1
                log.error(
                    "usage ledger: a row the store refuses is dropped (%d requests of %s on %s): %s",
                    tally.requests,
                    key[1],
                    key[0],
                    refused,
                )
            except Exception as exc:
                self._doubt = single
                for later, more in rows[n + 1 :]:
                    _added(self._pending, later, more)
                    self._pending_debits += more.requests
                self._failed(exc)
                return False
            else:
                self.flushes += 1
        return True

    async def refresh(self, *, strict: bool = False) -> None:
        """Balances = the store's sums for the window + the debits not committed yet."""
        if self._debits:
            self._fold()
        window = self.window
        try:
            sums = await self.store.spent(window)
        except UsageStoreError as exc:
            if strict:
                raise
            self._failed(exc)
            return
        if window != self.window:  # the month turned while reading: the next refresh reads the new one
            return
        if self._debits:  # debited while the store was read
            self._fold()
        doubt = self._doubt.rows if self._doubt is not None else {}
        for rows in (self._pending, doubt):  # a batch in doubt counts: a balance is never too low
            for (day, tenant, key_id, _model), tally in rows.items():
                if day >= window:
                    sums.setdefault((tenant, key_id), Tally()).add(tally)
        tenants: dict[str, Tally] = {}
        for (tenant, _key), tally in sums.items():
            tenants.setdefault(tenant, Tally()).add(tally)
        self._spent, self._tenants = sums, tenants

    def _failed(self, exc: Exception) -> None:
        """A failed commit or refresh: counted, logged once per streak (a bug with its traceback), and
        the next try backed off."""
        self.failures += 1
        self._streak += 1
        backoff = min(MAX_BACKOFF_S, self.settings.flush_s * 2 ** (self._streak - 1))
        self._retry_at = self._wall() + backoff
        if self.last_error is None:
            log.error(
                "usage ledger: %s (debits are kept in memory and written when it works again)",
                exc,
                exc_info=None if isinstance(exc, UsageStoreError) else exc,
            )
        self.last_error = str(exc) if isinstance(exc, UsageStoreError) else f"internal: {type(exc).__name__}"

    def _refused(self, exc: UsageRowsRefused) -> None:
        """The store refused a batch's values: counted as a failure, no back-off (the store works)."""
        self.failures += 1
        self.last_error = str(exc)


def _added(table: dict[K, Tally], key: K, usage: Tally) -> None:
    """``usage`` added to ``table[key]`` (a copy of it when the key is new)."""
    total = table.get(key)
    if total is None:
        table[key] = usage.copy()
    else:
        total.add(usage)
