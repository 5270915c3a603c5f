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

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from interlock.runtime.base.clock import Clock
from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.loaded.tables import Candidate
from interlock.runtime.upstream.base import Adapter

log = logging.getLogger("interlock.recovery")

CHECK_FIRST_S = 1.0  # the first check after a circuit opens
CHECK_MAX_S = 8.0  # the longest wait between two checks of one candidate
JITTER = 0.25


@dataclass(slots=True)
class _Schedule:
    """One open candidate's next check (monotonic) and the back-off that set it."""

    due: float
    backoff_s: float
    running: bool = False


class RecoveryChecks:
    """The schedule of checks of the candidates whose circuits are open; run by the probe loop."""

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
        self.plan = plan
        self.health = health
        self.adapters = adapters
        self.metrics = metrics
        self.clock = clock
        self.rng = rng if rng is not None else random.Random()
        self.schedule: dict[str, _Schedule] = {}

    def _wait(self, backoff_s: float) -> float:
        return backoff_s * (1.0 - JITTER * self.rng.random())

    def sync(self) -> None:
        """Schedule the candidates whose circuit opened since; drop those closed or gone."""
        plan = self.plan()
        now = self.clock()
        open_now = [cid for cid in self.health.open_candidates() if _check_of(plan, cid) is not None]
        for cid in open_now:
            if cid not in self.schedule:
                self.schedule[cid] = _Schedule(now + self._wait(CHECK_FIRST_S), CHECK_FIRST_S)
                self.health.candidate(cid).next_check_at = self.schedule[cid].due
        kept = set(open_now)
        for cid in [cid for cid, s in self.schedule.items() if cid not in kept and not s.running]:
            del self.schedule[cid]
            self.health.candidate(cid).next_check_at = None

    def next_due(self) -> float | None:
        """When the next check is due (monotonic), None when no circuit is open."""
        waiting = [s.due for s in self.schedule.values() if not s.running]
        return min(waiting) if waiting else None

    async def run_due(self) -> None:
        """The checks due now, concurrently."""
        self.sync()
        now = self.clock()
        plan = self.plan()
        due = [(cid, s) for cid, s in self.schedule.items() if not s.running and s.due <= now]
        jobs = []
        for cid, schedule in due:
            found = _check_of(plan, cid)
            if found is not None:
                schedule.running = True
                jobs.append(self._check(found[0], found[1], schedule, plan.health.probe_timeout_s))
        if jobs:
            await asyncio.gather(*jobs)

    async def _check(self, candidate: Candidate, name: str, schedule: _Schedule, timeout_s: float) -> None:
        from interlock.runtime.books.checks import (
            CHECKS,  # the first check: in the probe loop, a circuit open
        )

        run, strong = CHECKS[name]
        try:
            ok = await run(self.adapters[candidate.kind], self.health, candidate, timeout_s)
        except Exception:  # a bug in a check must not stop the others
            log.exception("recovery check of %s failed", candidate.id)
            ok = False
        finally:
            schedule.running = False
        forward = self.health.record_check(candidate.id, ok, strong=strong)
        self.metrics.circuit_checks.labels(candidate.metric_label, "ok" if ok else "failed").inc()
        state = self.health.candidate(candidate.id)
        if forward:
            log.info("recovery: %s passed its check; its next call is the trial", candidate.id)
            self.schedule.pop(candidate.id, None)
            state.next_check_at = None
            return
        backoff = min(schedule.backoff_s * 2.0, self._ceiling())
        schedule.backoff_s = backoff
        schedule.due = state.next_check_at = self.clock() + self._wait(backoff)

    def _ceiling(self) -> float:
        return min(CHECK_MAX_S, self.plan().health.probe_interval_s)


def _check_of(plan: RuntimePlan, cid: str) -> tuple[Candidate, str] | None:
    """The plan's candidate ``cid`` and its provider's check (a ``checks.CHECKS`` row); None when it has
    none (``off``) or is not listed."""
    candidate = plan.candidates.get(cid)
    if candidate is None or not candidate.routes:
        return None
    provider = plan.providers.get(candidate.provider)
    if provider is None or provider.recovery_check == "off":
        return None
    return candidate, provider.recovery_check
