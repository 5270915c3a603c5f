"""What a gateway runs beside its requests, in one list: started in order at startup, stopped in reverse
at shutdown.

Why one list: each part that holds a task, a connection or a file (the audit writer, the usage ledger,
the slot store, the upstream client, the speeds file, the background loops) is started after what it
needs and stopped before it, so the order is written once, as the list, instead of twice (a start
method and a stop method that must mirror each other). A start that fails stops what had started, in
reverse, and raises what failed: nothing is left running behind a gateway that never served.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger("interlock")


async def nothing() -> None:
    """A step's start or stop that has nothing to do."""


@dataclass(frozen=True, slots=True)
class Step:
    """One part's start and stop; ``stop`` runs only after ``start`` has returned."""

    name: str  # what the log says when a stop after a failed start fails
    start: Callable[[], Awaitable[None]] = nothing
    stop: Callable[[], Awaitable[None]] = nothing


class Lifespan:
    """The steps, started in order and stopped in reverse; each stopped at most once per start."""

    __slots__ = ("_started", "steps")

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = tuple(steps)
        self._started: list[Step] = []

    async def start(self) -> None:
        """Start every step in order; when one fails, stop the ones started, in reverse, and raise."""
        for step in self.steps:
            try:
                await step.start()
            except BaseException:
                await self._unwind()
                raise
            self._started.append(step)

    async def stop(self) -> None:
        """Stop the steps started, last first (a second call, or one without a start, stops nothing)."""
        while self._started:
            await self._started.pop().stop()

    async def _unwind(self) -> None:
        while self._started:
            step = self._started.pop()
            try:
                await step.stop()
            except Exception:  # the start's own error is the one raised
                log.exception("stopping %s after a failed start", step.name)
