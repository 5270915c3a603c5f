"""Concurrency slots per worker: a per-model limit, the worker's ``max_concurrent``, a bounded fair queue.

A request takes a slot before it calls the worker and gives it back when the call is over, whatever way
it ends (success, error, cancellation, client disconnect): ``SlotLease.release`` is idempotent and every
caller releases in ``finally``. When no slot is free the request waits in the worker's queue, at most
``max_waiting`` deep and ``max_wait`` long; past either bound it gets ``SlotUnavailable`` (429 with
``Retry-After``). A full queue turns away whoever would be served last: a newcomer whose fair place
comes before the last waiter's takes its place, and that waiter gets the 429. A freed slot is handed
directly to the first waiter that can use it, so a newcomer never overtakes a waiter that could have
run, and a waiter for a busy model does not block one for an idle model.
"First" is the queue's fair order (``fair.py``): interactive before batch, then each tenant's fair
share; with no tenant configured, arrival order.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from interlock.runtime.base.errors import SlotUnavailable
from interlock.runtime.loaded.callers import COMMON, Turn
from interlock.runtime.loaded.tables import WorkerLimits
from interlock.runtime.state.fair import FairClock, Place


@dataclass(slots=True, eq=False)
class Waiter:
    model: str
    limit: int
    future: asyncio.Future[None]
    place: Place


def _place(waiter: Waiter) -> Place:
    return waiter.place


@dataclass(slots=True, eq=False)
class SlotLease:
    """One held slot. ``release`` is safe to call more than once."""

    pool: SlotPool
    model: str
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.pool._release(self.model)


@dataclass(eq=False)
class SlotPool:
    """The slots of one worker. Survives plan reloads; ``configure`` updates its bounds in place."""

    name: str
    max_concurrent: int
    max_waiting: int
    max_wait_s: float
    in_use: int = 0
    per_model: dict[str, int] = field(default_factory=dict)
    waiters: list[Waiter] = field(default_factory=list)  # in fair order (``fair.py``)
    rejected: int = 0
    fair: FairClock = field(default_factory=FairClock)
    arrivals: int = 0

    def configure(self, max_concurrent: int, max_waiting: int, max_wait_s: float) -> None:
        self.max_concurrent = max_concurrent
        self.max_waiting = max_waiting
        self.max_wait_s = max_wait_s
        self._wake()

    def try_acquire(self, model: str, limit: int) -> SlotLease | None:
        """A slot now, or None."""
        if self._fits(model, limit):
            self._take(model)
            return SlotLease(self, model)
        return None

    def count_granted(self, model: str) -> SlotLease:
        """A slot another authority granted (the shared store) counted here too, whatever this pool's
        bound says, so that this process's own table, should it have to decide alone, knows it is held."""
        self._take(model)
        return SlotLease(self, model)

    async def acquire(self, model: str, limit: int, turn: Turn = COMMON) -> SlotLease:
        """A slot now, or after waiting in the queue in ``turn``'s place; ``SlotUnavailable`` past the
        queue's bounds."""
        lease = self.try_acquire(model, limit)
        if lease is not None:
            return lease
        waiter, timer = self._join(model, limit, turn)
        try:
            await waiter.future
        except SlotUnavailable:
            raise
        except BaseException:  # cancelled (client gone): give back a slot handed over meanwhile
            settled = waiter.future
            if settled.done() and not settled.cancelled() and settled.exception() is None:
                self._release(model)
            else:
                self._forget(waiter)
            raise
        finally:
            timer.cancel()
        return SlotLease(self, model)

    def _join(self, model: str, limit: int, turn: Turn) -> tuple[Waiter, asyncio.TimerHandle]:
        """Queue a waiter in ``turn``'s place (and its expiry); ``SlotUnavailable`` past the bounds."""
        place = self.fair.peek(turn, self.arrivals + 1)
        if self.max_wait_s <= 0 or (len(self.waiters) >= self.max_waiting and not self._push_out(place)):
            self.rejected += 1
            raise SlotUnavailable(
                f"worker {self.name} has no free slot for {model} and its queue is full "
                f"({len(self.waiters)} waiting)",
                retry_after=self.retry_after(),
            )
        loop = asyncio.get_running_loop()
        self.arrivals += 1
        self.fair.take(turn, place)
        waiter = Waiter(model, limit, loop.create_future(), place)
        bisect.insort(self.waiters, waiter, key=_place)
        return waiter, loop.call_later(self.max_wait_s, self._expire, waiter)

    def held(self) -> tuple[int, dict[str, int]]:
        """Slots in use, in all and by model (a copy)."""
        return self.in_use, dict(self.per_model)

    def retry_after(self) -> int:
        return max(1, math.ceil(self.max_wait_s))

    def _fits(self, model: str, limit: int) -> bool:
        """A slot is free for ``model`` (under its ``limit``) now."""
        return self.in_use < self.max_concurrent and self.per_model.get(model, 0) < limit

    def _take(self, model: str) -> None:
        self.in_use += 1
        self.per_model[model] = self.per_model.get(model, 0) + 1

    def _release(self, model: str) -> None:
        self.in_use -= 1
        left = self.per_model[model] - 1
        if left:
            self.per_model[model] = left
        else:
            del self.per_model[model]
        if self.waiters:
            self._wake()

    def _wake(self) -> None:
        """Hand free slots to the first waiters that can use them, in the queue's fair order."""
        if not self.waiters or self.in_use >= self.max_concurrent:
            return
        kept: list[Waiter] = []
        for waiter in self.waiters:
            if waiter.future.done():
                continue
            if self._fits(waiter.model, waiter.limit):
                self._take(waiter.model)
                self.fair.started(waiter.place)
                waiter.future.set_result(None)
            else:
                kept.append(waiter)
        self.waiters = kept
        if not kept:
            self.fair.idle()

    def _push_out(self, place: Place) -> bool:
        """The queue is full: the waiter that would be served last makes room for a newcomer whose
        ``place`` comes before it (and gets the 429 the newcomer would have had); False when none does."""
        if not self.waiters or self.max_waiting <= 0:
            return False
        last = self.waiters[-1]
        if last.place <= place:
            return False
        self.waiters.pop()
        self.rejected += 1
        if not last.future.done():
            last.future.set_exception(
                SlotUnavailable(
                    f"worker {self.name} has no free slot for {last.model} and its queue is full "
                    f"({len(self.waiters) + 1} waiting): a request of a tenant with less waiting took "
                    "this one's place",
                    retry_after=self.retry_after(),
                )
            )
        return True

    def _expire(self, waiter: Waiter) -> None:
        if waiter.future.done():
            return
        self._forget(waiter)
        self.rejected += 1
        waiter.future.set_exception(
            SlotUnavailable(
                f"worker {self.name} had no free slot for {waiter.model} within "
                f"{self.max_wait_s:g}s ({len(self.waiters)} waiting)",
                retry_after=self.retry_after(),
            )
        )

    def _forget(self, waiter: Waiter) -> None:
        with contextlib.suppress(ValueError):
            self.waiters.remove(waiter)
        if not self.waiters:
            self.fair.idle()


class SlotTable:
    """Every worker's pool, by worker name; pools outlive plan reloads so in-flight leases stay counted."""

    def __init__(self, make: Callable[[str, int, int, float], SlotPool] = SlotPool) -> None:
        self.pools: dict[str, SlotPool] = {}
        self.make = make  # a new worker's pool (the supervisor's count in shared memory: ``shared.py``)

    def configure(self, workers: Mapping[str, WorkerLimits]) -> None:
        """The current plan's bounds: new workers get a pool, known ones keep theirs, updated."""
        for name, w in workers.items():
            self.bound(name, w.max_concurrent, w.max_waiting, w.max_wait_s)

    def bound(self, name: str, max_concurrent: int, max_waiting: int, max_wait_s: float) -> None:
        """One worker's bounds: a new pool, or the known one updated in place."""
        pool = self.pools.get(name)
        if pool is None:
            self.pools[name] = self.make(name, max_concurrent, max_waiting, max_wait_s)
        else:
            pool.configure(max_concurrent, max_waiting, max_wait_s)
