"""Per-caller counters: requests and tokens in one-minute windows, requests in flight.

One ``CallerCounters`` per gateway process, chosen by its ``SlotBackend`` (``SlotBackend.caller_counters``):
``MemoryCounters`` (this process) for ``memory:`` and ``unix:``, ``RedisCounters`` (``redis.py``) for a
shared store. A counter is named by who it counts (``k:<key id>`` or ``t:<tenant>``).

Windows are fixed, aligned minutes (``floor(now / 60)``): a budget of N per minute admits at most N in
each, so up to 2N may pass within any 60 s that straddles a boundary. ``Retry-After`` is the time to
the next window. A request is admitted while its counters are below their limits. Tokens are
**reserved** at admission: ``take`` holds the request's estimate (prompt + requested output) as tokens
in flight, which count against ``tokens_per_minute`` with the window's until ``done`` settles them (the
estimate is dropped, the answer's usage added to the window). So concurrent requests cannot all be
admitted against the same remaining tokens: at most the last one admitted passes the budget, by what it
used beyond its own estimate. ``take`` checks every limit first and counts nothing unless all pass.
"""

from __future__ import annotations

import abc
import math
import time
from collections.abc import Callable, Sequence

from interlock.runtime.access import Budget, Refusal

WINDOW_S = 60.0


class CallerCounters(abc.ABC):
    """Counters of the caller limits, in this process or in a shared store."""

    scope = "process"

    @abc.abstractmethod
    async def take(self, budgets: Sequence[Budget], hold: int = 0) -> Refusal | None:
        """Admit one request against every budget: None (then counted: one request, one in flight,
        ``hold`` tokens reserved), or the first refusal (nothing counted)."""

    @abc.abstractmethod
    async def done(self, budgets: Sequence[Budget], tokens: int, held: int = 0) -> None:
        """The request admitted by ``take`` ended: one fewer in flight, the ``held`` tokens released,
        ``tokens`` (what it used) added to the window. Never raises."""


class MemoryCounters(CallerCounters):
    """This process's counters (``clock``: epoch seconds, injectable for tests)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.window = -1
        self.requests: dict[str, int] = {}
        self.tokens: dict[str, int] = {}
        self.in_flight: dict[str, int] = {}
        self.held: dict[str, int] = {}  # tokens reserved by requests in flight (not per window)

    def _roll(self) -> float:
        now = self.clock()
        window = math.floor(now / WINDOW_S)
        if window != self.window:
            self.window = window
            self.requests.clear()
            self.tokens.clear()
        return now

    async def take(self, budgets: Sequence[Budget], hold: int = 0) -> Refusal | None:
        now = self._roll()
        wait = (self.window + 1) * WINDOW_S - now
        for b in budgets:
            if b.requests_per_minute and self.requests.get(b.name, 0) >= b.requests_per_minute:
                return Refusal(b.name, "requests_per_minute", b.requests_per_minute, wait)
            used = self.tokens.get(b.name, 0) + self.held.get(b.name, 0)
            if b.tokens_per_minute and used >= b.tokens_per_minute:
                return Refusal(b.name, "tokens_per_minute", b.tokens_per_minute, wait)
            if b.max_concurrent and self.in_flight.get(b.name, 0) >= b.max_concurrent:
                return Refusal(b.name, "max_concurrent", b.max_concurrent, 1.0)
        for b in budgets:
            self.requests[b.name] = self.requests.get(b.name, 0) + 1
            self.in_flight[b.name] = self.in_flight.get(b.name, 0) + 1
            if hold:
                self.held[b.name] = self.held.get(b.name, 0) + hold
        return None

    async def done(self, budgets: Sequence[Budget], tokens: int, held: int = 0) -> None:
        self._roll()
        for b in budgets:
            self.in_flight[b.name] = max(0, self.in_flight.get(b.name, 0) - 1)
            if held:
                self.held[b.name] = max(0, self.held.get(b.name, 0) - held)
            if tokens:
                self.tokens[b.name] = self.tokens.get(b.name, 0) + tokens
