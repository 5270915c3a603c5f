"""Who waits when a model is full: the order of a slot queue, by priority class, then fair share.

The rule (self-clocked weighted fair queuing, one clock per queue):

- A waiter's place is ``(rank, finish, arrival)``: ``rank`` 0 for ``interactive``, 1 for ``batch``, so
  a batch waiter is handed a slot only when no interactive waiter can use it; ``finish`` is its
  tenant's virtual finish tag, ``max(clock, the tenant's last finish) + 1 / weight``; ``arrival`` keeps
  one tenant's waiters (and everyone's, with no tenant configured: one share for all) first come, first
  served.
- When a waiter is handed a slot, the clock moves to its ``finish`` (never back). A tenant that has
  waited little starts at the clock, ahead of a flooder whose tags run far past it; two tenants that
  both keep waiters get slots in the ratio of their weights; a tenant alone gets every slot that frees
  (the queue is work-conserving: fairness orders waiters, it never holds a slot free).
- When the queue empties the clock and the tenants' tags start again from 0 (no history is kept past
  the last waiter: a tenant is not punished later for what it used while nobody waited).

A full queue (``max_waiting``) turns away whoever would be served last: a newcomer whose place
comes before the last waiter's pushes that waiter out (it gets the 429), so a flooder that fills the
queue cannot keep the others out of it; a newcomer that would be last is refused, its tag untouched.

Only waiters are tagged: a request that finds a free slot takes it and the clock never hears of it,
so the common case (no contention) costs nothing. Batch starvation is bounded by the queue's own
``max_wait``: a batch waiter that no slot reaches in time gets 429 + ``Retry-After`` like any waiter.
An interactive request that arrives while batch holds every slot waits at most for the first of those
slots to free: one request's service time per slot, never a queue of batch work.

The same rule runs in three places, one per place a queue lives: ``pool.py`` (this process, and the
supervisor's table for ``--workers``), ``runtime/fleet/line.py`` (the fleet line), and the Lua of
``redis.py`` (replicas), which keeps ``rank * CLASS_SPAN + finish`` as the waiter's score.
"""

from __future__ import annotations

from interlock.runtime.loaded.callers import Turn

Place = tuple[int, float, int]
"""``(rank, finish, arrival)``: lower goes first."""

CLASS_SPAN = float(2**40)
"""Redis's score of a batch waiter adds this to its finish tag: the tags of a queue that is never empty
stay far below it (they grow by at most 100 a slot handed over, weights being at least 0.01), and a
double still tells tags 1/1000 apart there (weights are at most 1000)."""


class FairClock:
    """One queue's virtual clock and its tenants' last finish tags."""

    __slots__ = ("clock", "last")

    def __init__(self) -> None:
        self.clock = 0.0
        self.last: dict[str, float] = {}

    def place(self, turn: Turn, arrival: int) -> Place:
        """The place of a waiter that joins now (its tenant's tag moves on)."""
        place = self.peek(turn, arrival)
        self.take(turn, place)
        return place

    def peek(self, turn: Turn, arrival: int) -> Place:
        """The place a waiter would take, the tags left as they are."""
        return (turn.rank, max(self.clock, self.last.get(turn.tenant, 0.0)) + 1.0 / turn.weight, arrival)

    def take(self, turn: Turn, place: Place) -> None:
        """A waiter joins at ``place`` (from ``peek``): its tenant's tag moves on."""
        self.last[turn.tenant] = place[1]

    def started(self, place: Place) -> None:
        """The waiter at ``place`` was handed a slot."""
        if place[1] > self.clock:
            self.clock = place[1]

    def idle(self) -> None:
        """The queue is empty: start again."""
        self.clock = 0.0
        self.last.clear()
