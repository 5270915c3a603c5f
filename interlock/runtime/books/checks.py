"""The checks of the candidates whose circuits are open (``recovery.py``'s module docstring says which is
which and when): a provider's ``recovery_check`` -> the check (``CHECKS``), and their ``Schedule``.
Imported when the first circuit opens, by the probe loop, never on the request path."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from interlock.runtime.base.clock import Clock
from interlock.runtime.base.errors import ConnectTimeout, UpstreamError
from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.loaded.tables import Candidate
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.upstream.exchange import probe_endpoint

log = logging.getLogger("interlock.recovery")

PING = "ping"

Check = Callable[[Adapter, HealthBook, Candidate, float], Awaitable[bool]]


async def guarded(call: Awaitable[Any], label: str, timeout_s: float) -> UpstreamError | None:
    """Run one upstream call of a check: its failure as an UpstreamError, None when it passed."""
    try:
        await asyncio.wait_for(call, timeout_s + 1.0)
    except UpstreamError as exc:
        return exc
    except TimeoutError:  # the adapter should time out itself; this is the backstop
        return ConnectTimeout(f"check of {label} timed out")
    return None


async def _probe(adapter: Adapter, health: HealthBook, candidate: Candidate, timeout_s: float) -> bool:
    """Its endpoints' own probe (each recorded as a probe): passes when one of them passes."""
    passed = False
    for route in candidate.routes:
        label = route.endpoint.label
        error = await guarded(adapter.probe(route.endpoint, timeout_s), label, timeout_s)
        health.record_probe(label, error)
        passed = passed or error is None
    return passed


async def _request(adapter: Adapter, health: HealthBook, candidate: Candidate, timeout_s: float) -> bool:
    """A 1-token chat request to its model on its first endpoint: passes when the model answered."""
    endpoint = probe_endpoint(candidate.routes[0].endpoint, timeout_s)
    body: dict[str, Any] = {
        "model": candidate.model,
        "messages": [{"role": "user", "content": PING}],
        "max_tokens": 1,
        "stream": False,
    }
    return (
        await guarded(adapter.chat(endpoint, candidate.model, body, None), endpoint.label, timeout_s) is None
    )


CHECKS: Mapping[str, tuple[Check, bool]] = {"probe": (_probe, False), "request": (_request, True)}
"""A provider's ``recovery_check`` -> (the check, whether a pass is strong evidence: it generated)."""


@dataclass(slots=True)
class _Due:
    """One open candidate's next check (monotonic) and the back-off that set it."""

    due: float
    backoff_s: float
    running: bool = False


class Schedule:
    """The schedule of checks of the candidates whose circuits are open (``recovery.RecoveryChecks`` makes it
    when the first opens, and the probe loop runs it): the first ``first_s`` after one opened, then twice
    as long after each check that did not bring its trial forward, at most ``max_s`` apart."""

    def __init__(
        self,
        plan: Callable[[], RuntimePlan],
        health: HealthBook,
        adapters: Mapping[str, Adapter],
        metrics: Metrics,
        clock: Clock,
        rng: random.Random,
        first_s: float,
        max_s: float,
        jitter: float,
    ) -> None:
        self.plan = plan
        self.health = health
        self.adapters = adapters
        self.metrics = metrics
        self.clock = clock
        self.rng = rng
        self.first_s, self.max_s, self.jitter = first_s, max_s, jitter
        self.schedule: dict[str, _Due] = {}

    def _wait(self, backoff_s: float) -> float:
        return backoff_s * (1.0 - self.jitter * self.rng.random())

    def sync(self) -> None:
        """Schedule the candidates whose circuit opened since; drop those closed or gone."""
        plan = self.plan()
        now = self.clock()
        open_now = [cid for cid in self.health.open_candidates() if _check_of(plan, cid) is not None]
        for cid in open_now:
            if cid not in self.schedule:
                self.schedule[cid] = _Due(now + self._wait(self.first_s), self.first_s)
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

    async def _check(self, candidate: Candidate, name: str, schedule: _Due, timeout_s: float) -> None:
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
        return min(self.max_s, self.plan().health.probe_interval_s)


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
