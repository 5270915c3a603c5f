"""Per-caller counters: requests and tokens in one-minute windows, requests in flight.

One ``CallerCounters`` per gateway process, chosen by its ``SlotBackend`` (``SlotBackend.caller_counters``):
``MemoryCounters`` (this process) for ``memory:`` and ``unix:``, ``RedisCounters``
(``redis_counters.py``) for a shared store. A counter is named by who it counts (``k:<key id>`` or
``t:<tenant>``).

Windows are fixed, aligned minutes (``floor(now / 60)``): a budget of N per minute admits at most N in
each, so up to 2N may pass within any 60 s that straddles a boundary. ``Retry-After`` is the time to
the next window. A request is admitted while its counters are below their limits (for tokens: while
the window leaves what it must have, ``least``: its prompt and the least answer). Tokens are
**reserved** at admission: ``reserve`` holds the request's estimate (prompt + requested output), or
what the window leaves of it (the caller then cuts the request's output to that), as tokens in flight,
which count against ``tokens_per_minute`` with the window's until ``done`` settles them (the hold is
dropped, the answer's usage added to the window). So concurrent requests cannot all be admitted against
the same remaining tokens, and none goes upstream with a ceiling the window cannot cover. ``reserve``
checks every limit first and counts nothing unless all pass.

Credits reservations (``usage/credits.py``) are kept beside them, in the same table or store, so every
process sees every other's: a ``Claim`` per level with a budget (``k:<key id>:<unit>``,
``t:<tenant>:<unit>``) is admitted while what that level's requests in flight hold, plus what this one
asks now, is within the room the ledger leaves (budget less spent); then its estimate is held until
``unclaim``, or as much of it as the room still leaves (``Held.claims`` says what each level granted:
the caller caps the request's output to it). ``claim`` checks every level first and holds nothing
unless all pass; check and hold are one step in every backend (one Lua script, one message to the
supervisor), so requests admitted at once never hold more than the room between them.
"""

from __future__ import annotations

import abc
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from interlock.runtime.loaded.callers import Budget, Refusal

WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class Claim:
    """One credits level of one request, in the level's unit (tokens, or millionths of the currency)."""

    name: str  # ``k:<key id>:<unit>`` or ``t:<tenant>:<unit>``
    room: int  # the budget less what the ledger says was spent (may be negative: spent past it)
    asked: int  # what admission needs free now (the prompt and the least answer)
    hold: int  # what it would reserve until the request ends (prompt + requested output); granted:
    # as much of it as the room leaves, never less than ``asked``


@dataclass(frozen=True, slots=True)
class Short:
    """A refused claim: the first level without room, and what its requests in flight hold."""

    index: int
    held: int


@dataclass(slots=True)
class Held:
    """What ``claim`` reserved for one request; ``unclaim`` gives it back."""

    claims: tuple[Claim, ...]
    ident: int = 0  # the supervisor's name for it (``--workers N``): it settles by this
    spare: bool = False  # held in this process's own table while the store was out
    released: bool = False
    output: int | None = None  # the most output tokens the holds cover (``usage/credits.py`` sets it)


def granted(claims: Sequence[Claim], holds: Sequence[int]) -> tuple[Claim, ...]:
    """``claims`` with the holds a backend granted them."""
    pairs = zip(claims, holds, strict=True)
    return tuple(c if c.hold == hold else replace(c, hold=hold) for c, hold in pairs)


class CallerCounters(abc.ABC):
    """Counters of the caller limits, in this process or in a shared store."""

    scope = "process"

    async def take(self, budgets: Sequence[Budget], hold: int = 0) -> Refusal | None:
        """Admit one request against every budget: None (then counted: one request, one in flight,
        ``hold`` tokens reserved, or what the tokens per minute leave of them), or the first refusal
        (nothing counted)."""
        answer = await self.reserve(budgets, hold)
        return answer if isinstance(answer, Refusal) else None

    @abc.abstractmethod
    async def reserve(self, budgets: Sequence[Budget], hold: int = 0, least: int = 0) -> Refusal | int:
        """``take``, answering the tokens reserved: ``hold``, or what the tightest ``tokens_per_minute``
        leaves of it (the caller cuts the request's output to it); refused unless every budget leaves
        at least ``least`` (and at least one token). Check and reservation are one step."""

    @abc.abstractmethod
    async def done(self, budgets: Sequence[Budget], tokens: int, held: int = 0) -> None:
        """The request admitted by ``take`` ended: one fewer in flight, the ``held`` tokens released,
        ``tokens`` (what it used) added to the window. Never raises."""

    @abc.abstractmethod
    async def claim(self, claims: Sequence[Claim]) -> Held | Short:
        """Reserve every claim's ``hold`` (or what its ``room`` leaves of it, at least ``asked``) if each
        level's held plus ``asked`` is within its ``room``: what is held, each claim with the hold it
        was granted, or the first level short (nothing held)."""

    @abc.abstractmethod
    async def unclaim(self, held: Held) -> None:
        """The request that ``claim`` admitted ended: its holds go (``held.released`` is the caller's
        to test and set). Never raises."""


class MemoryCounters(CallerCounters):
    """This process's counters (``clock``: epoch seconds, injectable for tests)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.window = -1
        self.requests: dict[str, int] = {}
        self.tokens: dict[str, int] = {}
        self.in_flight: dict[str, int] = {}
        self.held: dict[str, int] = {}  # tokens reserved by requests in flight (not per window)
        self.claimed: dict[str, int] = {}  # credits reserved by requests in flight, by claim name

    def _roll(self) -> float:
        now = self.clock()
        window = math.floor(now / WINDOW_S)
        if window != self.window:
            self.window = window
            self.requests.clear()
            self.tokens.clear()
        return now

    async def reserve(self, budgets: Sequence[Budget], hold: int = 0, least: int = 0) -> Refusal | int:
        now = self._roll()
        wait = (self.window + 1) * WINDOW_S - now
        grant = hold
        for b in budgets:
            if b.requests_per_minute and self.requests.get(b.name, 0) >= b.requests_per_minute:
                return Refusal(b.name, "requests_per_minute", b.requests_per_minute, wait)
            used = self.tokens.get(b.name, 0) + self.held.get(b.name, 0)
            if b.tokens_per_minute:
                if used + max(1, least) > b.tokens_per_minute:
                    return Refusal(b.name, "tokens_per_minute", b.tokens_per_minute, wait)
                grant = min(grant, b.tokens_per_minute - used)
            if b.max_concurrent and self.in_flight.get(b.name, 0) >= b.max_concurrent:
                return Refusal(b.name, "max_concurrent", b.max_concurrent, 1.0)
        for b in budgets:
            self.requests[b.name] = self.requests.get(b.name, 0) + 1
            self.in_flight[b.name] = self.in_flight.get(b.name, 0) + 1
            if grant:
                self.held[b.name] = self.held.get(b.name, 0) + grant
        return grant

    async def done(self, budgets: Sequence[Budget], tokens: int, held: int = 0) -> None:
        self._roll()
        for b in budgets:
            self.in_flight[b.name] = max(0, self.in_flight.get(b.name, 0) - 1)
            if held:
                self.held[b.name] = max(0, self.held.get(b.name, 0) - held)
            if tokens:
                self.tokens[b.name] = self.tokens.get(b.name, 0) + tokens

    async def claim(self, claims: Sequence[Claim]) -> Held | Short:
        claimed = self.claimed
        for index, c in enumerate(claims):
            held = claimed.get(c.name, 0)
            if held + c.asked > c.room:
                return Short(index, held)
        holds = []
        for c in claims:
            held = claimed.get(c.name, 0)
            hold = max(0, min(c.hold, c.room - held))
            claimed[c.name] = held + hold
            holds.append(hold)
        return Held(granted(claims, holds))

    async def unclaim(self, held: Held) -> None:
        claimed = self.claimed
        for c in held.claims:
            left = claimed.get(c.name, 0) - c.hold
            if left > 0:
                claimed[c.name] = left
            else:
                claimed.pop(c.name, None)
