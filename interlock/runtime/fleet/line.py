"""The fleet line: a request that cannot start now waits for whichever of its workers can start it soonest.

Without it, a request whose best worker is full is bound to that worker's queue on arrival and stays
there, even when a slot frees elsewhere first or the wait there turns out longer than a load elsewhere.
With it, the request waits unbound in one line per candidate (in fair order, ``runtime.state.fair``:
interactive before batch, then each tenant's weighted share; with no tenant, arrival order) and the
line is walked again whenever something changes that could start a waiter:

- a slot taken through the slot guard is given back (``FleetLease.release``), on any worker;
- a request joins the line;
- a waiter's hold-out ends (below): a timer.

A walk goes through the line in that order. Each waiter with a free slot on one of its routes has
its routes ordered by ``Scorer.order`` with the waiters before it counted as queued ahead of it on
every full worker (``ahead``): the first waiters hold out for the worker where the model is loaded
(its next slot is expected sooner than a load elsewhere), and the first waiter whose wait there would
pass a load elsewhere takes the free slot and starts that load. A waiter holds out for a full worker
no longer than the wait it expected there when it first chose to (``hold_until``); past that, the
estimate was wrong and it takes its best free slot. A slot is taken with
``SlotBackend.acquire(wait=False)``: the backend stays the authority on every limit.

Bounds as the per-worker queue's: a request joins only while the line is shorter than its first
choice's ``max_waiting`` (or when its fair place comes before the last waiter's, which is pushed out
with the 429 instead) and waits at most that worker's ``max_wait``; past either it gets
``SlotUnavailable`` (429 + ``Retry-After``). A waiter that goes (client disconnect) leaves the line; a
slot handed to it meanwhile is given back.

Scope: one process. Releases by other processes (``--workers N``, Redis) are not seen here, so the
slot guard uses the line only with a backend whose ``scope`` is ``process``; with a shared backend a
request is bound to one worker's queue on arrival, as before.

Invariants: a waiter is in its line until its future is settled; a settled waiter holds exactly one
lease, owned from then on by the caller of ``wait``; at most one walk of a line runs at a time (a
change during a walk makes it walk again).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field

from interlock.common.patterns import untagged
from interlock.runtime.base.clock import Clock
from interlock.runtime.base.errors import SlotUnavailable
from interlock.runtime.fleet.prefix import Prefix
from interlock.runtime.fleet.scoring import Scorer
from interlock.runtime.loaded.callers import COMMON, Turn
from interlock.runtime.loaded.tables import Candidate, Route, RoutingSettings, WorkerLimits
from interlock.runtime.state.base import Lease, SlotBackend
from interlock.runtime.state.fair import FairClock, Place


@dataclass(eq=False, slots=True)
class _Waiter:
    candidate: Candidate
    routes: tuple[Route, ...]
    future: asyncio.Future[tuple[Route, Lease]]
    place: Place  # in the line's fair order
    hold_until: float | None = None  # holding out for a full worker until then (monotonic)
    prefix: Prefix | None = None  # the prompt's blocks (prefix affinity)


def _place(waiter: _Waiter) -> Place:
    return waiter.place


class FleetLease(Lease):
    """A held slot whose release walks the fleet lines again (a slot freed may start a waiter)."""

    __slots__ = ("fleet", "held")

    def __init__(self, held: Lease, fleet: FleetLine) -> None:
        self.held = held
        self.fleet = fleet

    async def release(self) -> None:
        held, self.held = self.held, _Released()
        await held.release()
        if not isinstance(held, _Released):
            self.fleet.changed()


class _Released(Lease):
    __slots__ = ()

    async def release(self) -> None:
        return None


@dataclass(eq=False, repr=False)
class FleetLine:
    """This process's waiters per candidate, dispatched to the worker that can start them soonest."""

    slots: SlotBackend
    scorer: Scorer
    settings: Callable[[], RoutingSettings]
    limits: Callable[[], Mapping[str, WorkerLimits]]
    _: KW_ONLY
    clock: Clock = time.monotonic
    # candidate id -> its waiters in fair order, and its line's fair clock
    lines: dict[str, list[_Waiter]] = field(default_factory=dict, init=False)
    clocks: dict[str, FairClock] = field(default_factory=dict, init=False)
    dispatched: int = field(default=0, init=False)  # waiters started by a walk (all time)
    _arrivals: Iterator[int] = field(default_factory=lambda: itertools.count(1), init=False)
    _walking: set[str] = field(default_factory=set, init=False)
    _again: set[str] = field(default_factory=set, init=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _timers: dict[str, asyncio.TimerHandle] = field(default_factory=dict, init=False)

    @property
    def usable(self) -> bool:
        """The line sees every release only when the slots are this process's."""
        return self.slots.scope == "process"

    def waiting(self, candidate_id: str) -> int:
        return len(self.lines.get(candidate_id, ()))

    def report(self) -> dict[str, int]:
        """Waiters per candidate (only candidates with some)."""
        return {cid: len(line) for cid, line in sorted(self.lines.items()) if line}

    def wrap(self, lease: Lease) -> Lease:
        return FleetLease(lease, self)

    async def wait(
        self,
        candidate: Candidate,
        routes: tuple[Route, ...],
        first: Route,
        prefix: Prefix | None = None,
        turn: Turn = COMMON,
    ) -> tuple[Route, Lease]:
        """Join ``candidate``'s line in ``turn``'s place; the route and slot it is dispatched to.
        ``first`` (the choice on arrival) gives the bounds; ``SlotUnavailable`` past them."""
        assert first.worker is not None
        limits = self.limits().get(first.worker)
        max_waiting = limits.max_waiting if limits is not None else 0
        max_wait_s = limits.max_wait_s if limits is not None else 0.0
        retry_after = max(1, math.ceil(max_wait_s))
        waiting = self.waiting(candidate.id)
        clock = self.clocks.get(candidate.id) or FairClock()
        place = clock.peek(turn, next(self._arrivals))
        if max_wait_s <= 0 or (
            waiting >= max_waiting and not self._push_out(candidate.id, place, retry_after)
        ):
            raise SlotUnavailable(
                f"no worker of {candidate.id} has a free slot and its line is full ({waiting} waiting)",
                retry_after=retry_after,
            )
        loop = asyncio.get_running_loop()
        self.clocks[candidate.id] = clock
        clock.take(turn, place)
        waiter = _Waiter(candidate, routes, loop.create_future(), place, prefix=prefix)
        bisect.insort(self.lines.setdefault(candidate.id, []), waiter, key=_place)
        timer = loop.call_later(max_wait_s, self._expire, waiter, max_wait_s, retry_after)
        self._walk_soon(candidate.id)
        try:
            return await waiter.future
        except SlotUnavailable:
            raise
        except BaseException:  # gone (client disconnect): give back a slot handed over meanwhile
            settled = waiter.future
            if settled.done() and not settled.cancelled() and settled.exception() is None:
                _, lease = settled.result()
                await lease.release()
            else:
                self._leave(waiter)
            raise
        finally:
            timer.cancel()

    def changed(self) -> None:
        """A slot was given back: walk every line that has waiters."""
        for cid, line in self.lines.items():
            if line:
                self._walk_soon(cid)

    # ----- the walk -----

    def _walk_soon(self, cid: str) -> None:
        task = asyncio.get_running_loop().create_task(self._walk(cid))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _walk(self, cid: str) -> None:
        if cid in self._walking:
            self._again.add(cid)
            return
        self._walking.add(cid)
        try:
            while True:
                self._again.discard(cid)
                await self._pass(cid)
                if cid not in self._again:
                    break
        finally:
            self._walking.discard(cid)

    async def _pass(self, cid: str) -> None:
        """One walk of the line: start every waiter whose soonest start is a free slot now."""
        line = self.lines.get(cid)
        if not line:
            return
        settings = self.settings()
        now = self.clock()
        ahead = 0
        wake_at = math.inf
        for waiter in list(line):
            if waiter.future.done():
                self._leave(waiter)
                continue
            candidate = waiter.candidate
            free = [r for r in waiter.routes if self._free(candidate, r)]
            if not free:
                ahead += 1
                continue
            best = self.scorer.order(candidate, waiter.routes, settings, ahead=ahead, prefix=waiter.prefix)[0]
            if not self._free(candidate, best):  # holding out for a full worker
                scored = self.scorer.last.get(best.worker or "")
                if waiter.hold_until is None:
                    waiter.hold_until = now + (scored.expected_s if scored is not None else 0.0)
                if now < waiter.hold_until:
                    wake_at = min(wake_at, waiter.hold_until)
                    ahead += 1
                    continue
                best = self.scorer.order(candidate, tuple(free), settings, ahead=ahead, prefix=waiter.prefix)[
                    0
                ]
            assert best.worker is not None
            assert best.slot_limit is not None
            lease = await self.slots.acquire(
                best.worker, untagged(candidate.model), best.slot_limit, wait=False
            )
            if lease is None:  # taken meanwhile (another request, another process)
                ahead += 1
                continue
            if waiter.future.done():  # gone while the slot was taken
                await lease.release()
                self._leave(waiter)
                continue
            clock = self.clocks.get(cid)
            if clock is not None:
                clock.started(waiter.place)
            self._leave(waiter)
            self.scorer.sent(candidate, best, waiter.prefix)
            self.dispatched += 1
            waiter.future.set_result((best, self.wrap(lease)))
        self._wake_at(cid, wake_at)

    def _free(self, candidate: Candidate, route: Route) -> bool:
        if route.worker is None:
            return True
        return self.scorer.occupancy(route.worker, untagged(candidate.model), route.slot_limit or 1)[0] > 0

    def _wake_at(self, cid: str, at: float) -> None:
        old = self._timers.pop(cid, None)
        if old is not None:
            old.cancel()
        if at < math.inf:
            delay = max(at - self.clock(), 0.0)
            self._timers[cid] = asyncio.get_running_loop().call_later(delay, self._walk_soon, cid)

    def _push_out(self, cid: str, place: Place, retry_after: int) -> bool:
        """The line is full: its last waiter makes room for a newcomer whose ``place`` comes before it
        (and gets the 429 instead); False when none does."""
        line = self.lines.get(cid)
        if not line or line[-1].place <= place:
            return False
        last = line.pop()
        if not last.future.done():
            last.future.set_exception(
                SlotUnavailable(
                    f"no worker of {cid} has a free slot and its line is full ({len(line) + 1} waiting): "
                    "a request of a tenant with less waiting took this one's place",
                    retry_after=retry_after,
                )
            )
        return True

    def _leave(self, waiter: _Waiter) -> None:
        line = self.lines.get(waiter.candidate.id)
        if line is not None:
            with contextlib.suppress(ValueError):
                line.remove(waiter)
            if not line:
                del self.lines[waiter.candidate.id]
                self.clocks.pop(waiter.candidate.id, None)  # an empty line starts its clock again

    def _expire(self, waiter: _Waiter, max_wait_s: float, retry_after: int) -> None:
        if waiter.future.done():
            return
        self._leave(waiter)
        waiter.future.set_exception(
            SlotUnavailable(
                f"no worker of {waiter.candidate.id} had a free slot within {max_wait_s:g}s "
                f"({self.waiting(waiter.candidate.id)} waiting)",
                retry_after=retry_after,
            )
        )
