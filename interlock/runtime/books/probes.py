"""The background probe loop: outside the request path, every ``probe_interval``, probe every endpoint.

Ollama workers answer ``GET /api/tags``, OpenAI-compatible providers ``GET /models`` (``Adapter.probe``);
providers with ``probe: false`` are left alone. A failed probe marks the endpoint unhealthy at once, so the
first request after a box died already skips it; a passing probe (or any successful call) restores it.
The loop reads the current plan every round, so a reload takes effect at the next round. Each round
also refreshes live Ollama metadata (``MetadataFetcher``: /api/ps, and /api/tags + /api/show when older
than the plan's TTL) and the load of OpenAI-compatible workers that name their ``server``
(``SignalFetcher``: ``/metrics``, llama.cpp's ``/slots``), concurrently with the probes; the first round
runs at start, before readiness. Those two rounds are the fleet's (``fleet/plug.py`` sets them when a plan
first has workers): a plan without workers probes its endpoints and imports neither.
Rounds are ``probe_interval`` apart give or take 10% at random, so the processes of a host and the
replicas of a fleet do not all probe a box in the same instant (what one finds, the others hear:
``runtime/state``).

A worker that is down is not left until the next round (up to ``probe_interval``, 30 s by default):
between rounds the loop probes it again alone, ``RECHECK_FIRST_S`` after the probe that found it down,
then twice as long after each probe that finds it still down, never longer apart than
``RECHECK_MAX_S`` or the interval. A request that finds its worker full calls ``busy``: a down worker's
next probe is brought forward to now, at most once per ``RECHECK_FIRST_S`` (the probe runs here, in
the loop, never on that request's path). So a worker that was down when the gateway started, or that
restarts, is seen within seconds.

The same loop runs the checks of candidates whose circuit is open (``RecoveryChecks``,
``books/recovery.py``): the health book wakes it when a circuit opens, and its pause ends at the next
check due.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from interlock.runtime.base.clock import Clock
from interlock.runtime.base.errors import ConnectTimeout, UpstreamError
from interlock.runtime.base.periodic import Periodic
from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.books.recovery import RecoveryChecks
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.wire.base import Endpoint

log = logging.getLogger("interlock.probes")


class Round(Protocol):
    """A round of fetches beside the probes (the fleet's: Ollama metadata, servers' load signals)."""

    async def refresh(self, plan: RuntimePlan) -> None: ...


RECHECK_FIRST_S = 1.0  # a down worker's first probe of its own, after the one that found it down
RECHECK_MAX_S = 8.0  # the longest back-off between them (and never longer than probe_interval)


@dataclass(slots=True)
class _Recheck:
    """A down endpoint's next probe of its own (monotonic) and the back-off that set it."""

    endpoint: Endpoint
    due: float
    backoff_s: float
    probed_at: float


class ProbeLoop(Periodic):
    """Probes every endpoint of the current plan each cycle (with jitter), and refreshes metadata."""

    task_name = "interlock-probes"
    log = log
    failed = "probe round failed"

    def __init__(
        self,
        plan: Callable[[], RuntimePlan],
        health: HealthBook,
        adapters: Mapping[str, Adapter],
        metrics: Metrics,
        metadata: Round | None = None,
        *,
        jitter: float = 0.1,
        signals: Round | None = None,
        recovery: RecoveryChecks | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.plan = plan
        self.metadata = metadata
        self.signals = signals
        self.recovery = recovery
        self.jitter = jitter
        self._random = random.Random()
        self.health = health
        self.adapters = adapters
        self.metrics = metrics
        self.first_round = asyncio.Event()
        self.clock = clock
        self.rechecks: dict[str, _Recheck] = {}  # down endpoints, by label
        self._next_round = 0.0  # when the next full round is due (monotonic); 0: at once

    async def probe_all(self) -> None:
        """One round: every probed endpoint of the current plan, concurrently."""
        plan = self.plan()
        timeout_s = plan.health.probe_timeout_s
        endpoints = [e for p in plan.providers.values() if p.probe for e in p.endpoints]
        labels = {e.label for e in endpoints}
        for label in [label for label in self.rechecks if label not in labels]:
            del self.rechecks[label]  # no longer probed (a reload)
        jobs = [self._probe(e, timeout_s) for e in endpoints]
        if self.metadata is not None:
            jobs.append(_aside(self.metadata.refresh(plan), "metadata round failed"))
        if self.signals is not None:
            jobs.append(_aside(self.signals.refresh(plan), "load signal round failed"))
        await asyncio.gather(*jobs)
        self.first_round.set()

    async def round(self) -> None:
        """A full round when one is due, else the down endpoints whose own probe is due; beside either,
        the checks of open circuits that are due."""
        now = self.clock()
        jobs: list[Awaitable[None]] = []
        if self.recovery is not None:
            jobs.append(_aside(self.recovery.run_due(), "recovery checks failed"))
        if now >= self._next_round:
            spread = 1.0 + self.jitter * (2.0 * self._random.random() - 1.0)
            self._next_round = now + self.plan().health.probe_interval_s * spread
            jobs.append(self.probe_all())
        else:
            due = [r.endpoint for r in self.rechecks.values() if r.due <= now]
            if due:
                timeout_s = self.plan().health.probe_timeout_s
                jobs.extend(self._probe(e, timeout_s) for e in due)
        await asyncio.gather(*jobs)

    def pause_s(self) -> float:
        """Until the next full round, the first down endpoint's own probe or the first check of an open
        circuit, whichever comes first."""
        wake = min([self._next_round, *(r.due for r in self.rechecks.values())])
        checked = self.recovery.next_due() if self.recovery is not None else None
        if checked is not None:
            wake = min(wake, checked)
        return max(wake - self.clock(), 0.0)

    def busy(self) -> None:
        """A request found its worker full: probe the down endpoints now, not at their back-off (at
        most once per ``RECHECK_FIRST_S`` each). Cheap enough for the request path: nothing down, no
        work; the probes run in the loop."""
        if not self.rechecks:
            return
        now = self.clock()
        woken = False
        for recheck in self.rechecks.values():
            soonest = recheck.probed_at + RECHECK_FIRST_S
            if recheck.due > soonest:
                recheck.due = max(soonest, now)
                woken = True
        if woken:
            self.wake()

    async def _probe(self, endpoint: Endpoint, timeout_s: float) -> None:
        error: UpstreamError | None = None
        try:
            await asyncio.wait_for(self.adapters[endpoint.kind].probe(endpoint, timeout_s), timeout_s + 1.0)
        except UpstreamError as exc:
            error = exc
        except TimeoutError:  # the adapter should time out itself; this is the backstop
            error = ConnectTimeout(f"probe of {endpoint.label} timed out")
        was_ok = self.health.endpoint_usable(endpoint.label)
        self.health.record_probe(endpoint.label, error)
        self._schedule(endpoint, error is None)
        self.metrics.probes.labels(endpoint.label, "ok" if error is None else error.error_class).inc()
        if error is not None and was_ok:
            log.warning("probe: %s is unhealthy (%s)", endpoint.label, error.error_class)
        elif error is None and not was_ok:
            log.info("probe: %s is healthy again", endpoint.label)

    def _schedule(self, endpoint: Endpoint, ok: bool) -> None:
        """After a probe: an endpoint found up leaves the rechecks; one found down is probed again
        after its back-off (the first, or twice the last, at most ``RECHECK_MAX_S`` or the interval)."""
        if ok:
            self.rechecks.pop(endpoint.label, None)
            return
        now = self.clock()
        ceiling = min(RECHECK_MAX_S, self.plan().health.probe_interval_s)
        last = self.rechecks.get(endpoint.label)
        backoff = RECHECK_FIRST_S if last is None else min(last.backoff_s * 2.0, ceiling)
        self.rechecks[endpoint.label] = _Recheck(endpoint, now + backoff, backoff, now)


async def _aside(refresh: Awaitable[None], failed: str) -> None:
    """A fetcher's round beside the probes: a help, never a reason to stop probing (a failure is logged)."""
    try:
        await refresh
    except Exception:
        log.exception(failed)
