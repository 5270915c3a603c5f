"""Prometheus metrics of one gateway process, in a registry of its own (no module-level state).

Label values are bounded: endpoints, status codes, alias names and candidate ids from the plan, error
classes. A raw ``provider/model`` that the plan does not list is labelled ``provider/*``; tenant, user
and request ids are never labels. Gauges that depend on time (circuits) are computed at scrape time.
Every metric is documented in docs/readme/50-runtime.md (a test checks it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from interlock.runtime.health import HealthBook
    from interlock.runtime.plan import RuntimePlan
    from interlock.runtime.slots import SlotTable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)


@dataclass(frozen=True, slots=True)
class StateView:
    """What the scrape-time gauges read: always the gateway's current plan and live state."""

    plan: Callable[[], RuntimePlan]
    health: HealthBook
    slots: SlotTable


class Metrics:
    def __init__(self, view: StateView) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter(
            "interlock_requests",
            "Requests answered, by endpoint and HTTP status.",
            ["endpoint", "status"],
            registry=r,
        )
        self.alias_resolved = Counter(
            "interlock_alias_resolved",
            "Requests answered, by the alias asked for and the candidate that answered.",
            ["alias", "candidate"],
            registry=r,
        )
        self.fallback = Counter(
            "interlock_fallback",
            "Moves from one candidate to the next, by reason (an error class or a skip reason).",
            ["from_candidate", "to_candidate", "reason"],
            registry=r,
        )
        self.upstream_errors = Counter(
            "interlock_upstream_errors",
            "Failed upstream calls, by candidate and error class.",
            ["candidate", "error_class"],
            registry=r,
        )
        self.stream_aborted = Counter(
            "interlock_stream_aborted",
            "Streams that ended with an error event after the first byte had reached the client.",
            ["reason"],
            registry=r,
        )
        self.client_disconnects = Counter(
            "interlock_client_disconnects",
            "Requests whose client went away before the answer was complete.",
            ["endpoint"],
            registry=r,
        )
        self.plan_reloads = Counter(
            "interlock_plan_reloads",
            "Plan reloads (SIGHUP), by result: loaded or refused.",
            ["result"],
            registry=r,
        )
        self.probes = Counter(
            "interlock_probes",
            "Background probes, by endpoint and result.",
            ["endpoint", "result"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "interlock_request_duration_seconds",
            "Time from request to the last byte of the answer (streams: the whole stream).",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.upstream_seconds = Histogram(
            "interlock_upstream_duration_seconds",
            "Time waiting on one upstream call (streams: until the first chunk), by candidate.",
            ["candidate"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.overhead_seconds = Histogram(
            "interlock_gateway_overhead_seconds",
            "The gateway's own time per request: total minus upstream waits and slot queueing "
            "(streams: until the first byte is sent).",
            ["endpoint"],
            buckets=OVERHEAD_BUCKETS,
            registry=r,
        )
        self.slot_wait_seconds = Histogram(
            "interlock_slot_wait_seconds",
            "Time requests waited in a worker's queue for a slot (requests that had to wait).",
            ["worker"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        r.register(_StateCollector(view))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector(Collector):
    def __init__(self, view: StateView) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        plan = self.view.plan()
        health = self.view.health
        providers = GaugeMetricFamily(
            "interlock_provider_healthy",
            "1 when at least one endpoint of the provider is usable.",
            labels=["provider"],
        )
        endpoints = GaugeMetricFamily(
            "interlock_endpoint_healthy",
            "1 when the endpoint (a provider, or an Ollama worker) is usable: probes pass, circuit closed.",
            labels=["endpoint"],
        )
        for name, provider in plan.providers.items():
            states = [health.endpoint_usable(e.label) for e in provider.endpoints]
            providers.add_metric([name], 1.0 if any(states) else 0.0)
            for endpoint, ok in zip(provider.endpoints, states, strict=True):
                endpoints.add_metric([endpoint.label], 1.0 if ok else 0.0)
        circuits = GaugeMetricFamily(
            "interlock_circuit_open",
            "1 while the candidate's circuit (or rate-limit hold) is open.",
            labels=["candidate"],
        )
        for cid in plan.candidates:
            circuits.add_metric([cid], 0.0 if health.candidate_block(cid) is None else 1.0)
        in_use = GaugeMetricFamily("interlock_slots_in_use", "Slots held on the worker.", labels=["worker"])
        waiting = GaugeMetricFamily(
            "interlock_slot_queue_waiting", "Requests waiting for a slot on the worker.", labels=["worker"]
        )
        rejected = CounterMetricFamily(
            "interlock_slot_rejected",
            "Requests refused with 429 by the worker's slots: queue full, or waited past max_wait.",
            labels=["worker"],
        )
        for name in plan.workers:
            pool = self.view.slots.pools.get(name)
            in_use.add_metric([name], float(pool.in_use if pool else 0))
            waiting.add_metric([name], float(len(pool.waiters) if pool else 0))
            rejected.add_metric([name], float(pool.rejected if pool else 0))
        info = GaugeMetricFamily(
            "interlock_plan_info", "1, labelled with the plan being served.", labels=["plan"]
        )
        info.add_metric([plan.content_hash], 1.0)
        yield from (providers, endpoints, circuits, in_use, waiting, rejected, info)
