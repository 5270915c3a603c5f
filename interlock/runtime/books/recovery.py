"""Active checks of a candidate while its circuit is open, so that recovery is seen within seconds of the
upstream's own, whatever the outage's length.

The circuit's own half-open trials (``health.py``: a backoff from ``FIRST_TRIAL_S`` up to ``open_for``)
are real requests; alone, a trial that lands in the last second of an outage puts the next one up to
``open_for`` later. So while a candidate's circuit is open, the probe loop (``books/probes.py``) checks
it here, outside the request path, ``CHECK_FIRST_S`` after it opened and then twice as long after each
check that did not bring its trial forward, at most ``CHECK_MAX_S`` apart (each wait drawn in
``[1 - JITTER, 1]`` of that, so replicas do not check in step). What a check is depends on the
provider (``checks.py::CHECKS``, one row each, imported by the first check):

- ``probe`` (the default, where the provider is probed): the candidate's endpoints' own probe (Ollama's
  ``/api/tags``, an OpenAI-compatible ``/models``, Anthropic's ``/v1/models``). The cheapest signal, and
  a weak one: a server lists a model it cannot run. It brings the trial forward only where it is
  evidence (``HealthBook.record_check``): the circuit was opened by connect failures, or a check failed
  since it opened (the whole server was down, and is back).
- ``request``: a 1-token chat request to the candidate's model (``max_tokens: 1``), which only a model
  that generates passes; opted into per provider (``recovery_check: request``), since on a cloud it is a
  billed request and on a local server it takes a slot.
- ``off``: no check (``probe: false`` and no ``recovery_check``): the trials alone.

Checks run with the probe timeout; a check's outcome is counted in
``interlock_circuit_checks_total{candidate, result}``. A candidate whose circuit closed (a trial
answered) or that the plan no longer lists is dropped from the schedule.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from interlock.runtime.base.clock import Clock

if TYPE_CHECKING:
    from interlock.runtime.books.checks import Schedule
    from interlock.runtime.books.health import HealthBook
    from interlock.runtime.books.metrics import Metrics
    from interlock.runtime.loaded.plan import RuntimePlan
    from interlock.runtime.upstream.base import Adapter

CHECK_FIRST_S = 1.0  # the first check after a circuit opens
CHECK_MAX_S = 8.0  # the longest wait between two checks of one candidate
JITTER = 0.25


class RecoveryChecks:
    """The checks of the candidates whose circuits are open, run by the probe loop: their schedule
    (``checks.Schedule``) is made when the first circuit opens; until then there is nothing to check."""

    def __init__(
        self,
        plan: Callable[[], RuntimePlan],
        health: HealthBook,
        adapters: Mapping[str, Adapter],
        metrics: Metrics,
        *,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self._parts = (plan, health, adapters, metrics)
        self.health = health
        self.clock = clock
        self.rng = rng if rng is not None else random.Random()
        self.schedule: Schedule | None = None

    def next_due(self) -> float | None:
        """When the next check is due (monotonic), None when no circuit is open."""
        return None if self.schedule is None else self.schedule.next_due()

    async def run_due(self) -> None:
        """The checks due now, concurrently."""
        if self.schedule is None:
            if not self.health.open_candidates():
                return
            from interlock.runtime.books.checks import Schedule  # the first circuit open: the probe loop

            plan, health, adapters, metrics = self._parts
            self.schedule = Schedule(
                plan, health, adapters, metrics, self.clock, self.rng, CHECK_FIRST_S, CHECK_MAX_S, JITTER
            )
        await self.schedule.run_due()
