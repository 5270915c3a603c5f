"""A shared store's fallback counters (``embedded.py``, ``redis_counters.py``): while the store is out, the
caller limits hold per process, and what ends is settled where it was counted."""

from __future__ import annotations

from collections.abc import Sequence

from interlock.runtime.loaded.callers import Budget, Refusal
from interlock.runtime.state.counters import Claim, Held, MemoryCounters, Short


class Spare:
    """A shared backend's own counters while its store is out, and the budgets taken from them: so
    what ends is settled where it was counted (a claim says so itself: ``Held.spare``)."""

    def __init__(self) -> None:
        self.counters = MemoryCounters()
        self.taken: dict[str, int] = {}  # budgets taken here, still in flight

    async def reserve(self, budgets: Sequence[Budget], hold: int, least: int) -> Refusal | int:
        answer = await self.counters.reserve(budgets, hold, least)
        if not isinstance(answer, Refusal):
            for b in budgets:
                self.taken[b.name] = self.taken.get(b.name, 0) + 1
        return answer

    async def done(self, budgets: Sequence[Budget], tokens: int, held: int) -> bool:
        """True when ``budgets`` were taken here (then settled here)."""
        if not budgets or not all(self.taken.get(b.name, 0) > 0 for b in budgets):
            return False
        for b in budgets:
            self.taken[b.name] -= 1
        await self.counters.done(budgets, tokens, held)
        return True

    async def claim(self, claims: Sequence[Claim]) -> Held | Short:
        answer = await self.counters.claim(claims)
        if isinstance(answer, Held):
            answer.spare = True
        return answer
