"""The background probe loop: outside the request path, every ``probe_interval``, probe every endpoint.

Ollama workers answer ``GET /api/tags``, OpenAI-compatible providers ``GET /models`` (``Adapter.probe``);
providers with ``probe: false`` are left alone. A failed probe marks the endpoint unhealthy at once, so the
first request after a box died already skips it; a passing probe (or any successful call) restores it.
The loop reads the current plan every round, so a reload takes effect at the next round. Each round
also refreshes live Ollama metadata (``MetadataFetcher``: /api/ps, and /api/tags + /api/show when older
than the plan's TTL) and the load of OpenAI-compatible workers that name their ``server``
(``SignalFetcher``: ``/metrics``, llama.cpp's ``/slots``), concurrently with the probes; the first round
runs at start, before readiness.
Rounds are ``probe_interval`` apart give or take 10% at random, so the processes of a host and the
replicas of a fleet do not all probe a box in the same instant (what one finds, the others hear:
``runtime/state``).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping

from interlock.runtime.errors import ConnectTimeout, UpstreamError
from interlock.runtime.fleet.metadata import MetadataFetcher
from interlock.runtime.fleet.signals.fetch import SignalFetcher
from interlock.runtime.health import HealthBook
from interlock.runtime.metrics import Metrics
from interlock.runtime.periodic import Periodic
from interlock.runtime.plan import RuntimePlan
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.wire.base import Endpoint

log = logging.getLogger("interlock.probes")


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
        metadata: MetadataFetcher | None = None,
        *,
        jitter: float = 0.1,
        signals: SignalFetcher | None = None,
    ) -> None:
        self.plan = plan
        self.metadata = metadata
        self.signals = signals
        self.jitter = jitter
        self._random = random.Random()
        self.health = health
        self.adapters = adapters
        self.metrics = metrics
        self.first_round = asyncio.Event()

    async def probe_all(self) -> None:
        """One round: every probed endpoint of the current plan, concurrently."""
        plan = self.plan()
        timeout_s = plan.health.probe_timeout_s
        endpoints = [e for p in plan.providers.values() if p.probe for e in p.endpoints]
        jobs = [self._probe(e, timeout_s) for e in endpoints]
        if self.metadata is not None:
            jobs.append(self._metadata(plan))
        if self.signals is not None:
            jobs.append(self._signals(plan))
        await asyncio.gather(*jobs)
        self.first_round.set()

    async def _metadata(self, plan: RuntimePlan) -> None:
        assert self.metadata is not None
        try:
            await self.metadata.refresh(plan)
        except Exception:  # metadata is a help, never a reason to stop probing
            log.exception("metadata round failed")

    async def _signals(self, plan: RuntimePlan) -> None:
        assert self.signals is not None
        try:
            await self.signals.refresh(plan)
        except Exception:  # load signals are a help, never a reason to stop probing
            log.exception("load signal round failed")

    async def round(self) -> None:
        await self.probe_all()

    def pause_s(self) -> float:
        spread = 1.0 + self.jitter * (2.0 * self._random.random() - 1.0)
        return self.plan().health.probe_interval_s * spread

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
        self.metrics.probes.labels(endpoint.label, "ok" if error is None else error.error_class).inc()
        if error is not None and was_ok:
            log.warning("probe: %s is unhealthy (%s)", endpoint.label, error.error_class)
        elif error is None and not was_ok:
            log.info("probe: %s is healthy again", endpoint.label)
