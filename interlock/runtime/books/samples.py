"""A bounded ring of samples taken on a timer, for the status page's pictures over the last minutes.

Every ``interval_s`` (outside the request path) one ``Sample`` records the slots in use per worker (the
slot backend's whole view: with ``--workers N`` or a shared store, every process together) and
the running count of answers per ``(alias, candidate)`` (the ``interlock_alias_resolved`` counter). The
page draws slot occupancy from the ring and a traffic share from the difference between now and the
oldest sample. The ring holds ``size`` samples (default 60 x 5 s: five minutes); nothing grows.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from interlock.runtime.base.clock import Clock
from interlock.runtime.base.periodic import Periodic
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.state.base import SlotBackend, SlotReport

log = logging.getLogger("interlock.samples")

SAMPLE_INTERVAL_S = 5.0
SAMPLES = 60


@dataclass(frozen=True, slots=True)
class Sample:
    at: float  # epoch seconds
    slots_in_use: Mapping[str, int]  # worker -> slots held
    answered: Mapping[tuple[str, str], float]  # (alias, candidate) -> answers so far


class Samples(Periodic):
    """The ring, and the loop that fills it."""

    task_name = "interlock-samples"
    log = log
    failed = "taking a sample failed"

    def __init__(
        self,
        slots: SlotBackend,
        metrics: Metrics,
        *,
        wall: Clock,
        interval_s: float = SAMPLE_INTERVAL_S,
        size: int = SAMPLES,
    ) -> None:
        self.slots = slots
        self.metrics = metrics
        self.wall = wall
        self.interval_s = interval_s
        self.ring: deque[Sample] = deque(maxlen=size)

    def now(self, slots: Mapping[str, SlotReport]) -> Sample:
        """The state at this moment, given the slot backend's report (bounded by the plan's size)."""
        return Sample(
            at=self.wall(),
            slots_in_use={name: report.in_use for name, report in slots.items()},
            answered=answered_counts(self.metrics),
        )

    async def take(self) -> None:
        self.ring.append(self.now(await self.slots.report()))

    async def round(self) -> None:
        await self.take()

    def pause_s(self) -> float:
        return self.interval_s


def answered_counts(metrics: Metrics) -> dict[tuple[str, str], float]:
    children = metrics.alias_resolved.children
    return {(alias, candidate): child.value for (alias, candidate), child in list(children.items())}


def share(
    oldest: Mapping[tuple[str, str], float], now: Mapping[tuple[str, str], float]
) -> dict[str, dict[str, float]]:
    """Answers per alias and candidate between two samples: ``{alias: {candidate: count}}``."""
    out: dict[str, dict[str, float]] = {}
    for key, value in now.items():
        delta = value - oldest.get(key, 0.0)
        if delta > 0:
            out.setdefault(key[0], {})[key[1]] = delta
    return out
