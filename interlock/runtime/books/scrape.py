"""What a Prometheus scrape reads besides the counters: gauges worked out from the live state at scrape
time (endpoints' and candidates' health, slots, the shared store, the plan served, the audit log and the
usage ledger's writer, the workers' telemetry). Made by the first scrape (``Metrics.registry``, the ops
app's ``/metrics``), never on the request path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from interlock.runtime.books.state_view import LedgerCounts, StateView

if TYPE_CHECKING:
    from interlock.schema.plan import PlanAccess


def registry(view: StateView, families: Callable[[], Iterator[Metric]]) -> CollectorRegistry:
    """A registry of ``families`` (the counters and histograms the gateway bumps) and the gauges of
    ``view``, in that order."""
    made = CollectorRegistry()
    made.register(_StateCollector(view, families))
    return made


class _StateCollector(Collector):
    def __init__(self, view: StateView, families: Callable[[], Iterator[Metric]]) -> None:
        self.view = view
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families()
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
            share = self.view.slots.local(name)  # this process's share: summed over processes, the whole
            in_use.add_metric([name], float(share.in_use))
            waiting.add_metric([name], float(share.waiting))
            rejected.add_metric([name], float(share.rejected))
        line = GaugeMetricFamily(
            "interlock_fleet_waiting",
            "Requests of this process waiting in the candidate's fleet line (for any of its workers).",
            labels=["candidate"],
        )
        if self.view.fleet_waiting is not None:
            for cid in plan.candidates:
                line.add_metric([cid], float(self.view.fleet_waiting(cid)))
        slots = self.view.slots
        degraded = GaugeMetricFamily(
            "interlock_state_degraded",
            "1 while the shared slot store is unreachable and limits hold per process only.",
            labels=["scope"],
        )
        degraded.add_metric([slots.scope], 1.0 if slots.degraded else 0.0)
        fallbacks = CounterMetricFamily(
            "interlock_state_fallbacks",
            "Times the shared slot store was lost or could not be reached (each starts per-process limits).",
            labels=["scope"],
        )
        fallbacks.add_metric([slots.scope], float(slots.fallbacks))
        info = GaugeMetricFamily(
            "interlock_plan_info", "1, labelled with the plan being served.", labels=["plan"]
        )
        info.add_metric([plan.content_hash], 1.0)
        yield from (providers, endpoints, circuits, in_use, waiting, rejected, line)
        yield from (degraded, fallbacks, info)
        if self.view.audit is not None:
            yield from self.view.audit()
        if self.view.gauges is not None:
            yield from self.view.gauges()
        yield from usage_families(self.view.ledger, plan.source.access)


def usage_families(ledger: LedgerCounts | None, access: PlanAccess) -> Iterator[Metric]:
    """The usage ledger's writer: debits waiting for a commit, commits, and store failures; the share of
    its monthly credits each key with credits has used (families without samples when there is no
    ledger)."""
    waiting = GaugeMetricFamily(
        "interlock_usage_waiting_debits",
        "Debits of this process not yet committed to the usage ledger (what a SIGKILL would lose).",
    )
    commits = CounterMetricFamily(
        "interlock_usage_commits", "Batches of debits committed to the usage ledger."
    )
    failures = CounterMetricFamily(
        "interlock_usage_store_failures",
        "Usage ledger commits and balance refreshes that failed (the debits are kept for the next commit).",
    )
    credits = GaugeMetricFamily(
        "interlock_key_credits_used_ratio",
        "Share of its monthly credits the key has used (keys with credits only; 1 or more: refused).",
        labels=["key"],
    )
    if ledger is not None:
        waiting.add_metric([], float(ledger.waiting))
        commits.add_metric([], float(ledger.flushes))
        failures.add_metric([], float(ledger.failures))
        for key_id, key in access.keys.items():
            limits = key.limits
            if limits.credits > 0:
                spent = ledger.spent((key.tenant, key_id))
                used = spent.cost_micros / 1_000_000 if limits.credits_unit == "money" else spent.tokens
                credits.add_metric([key_id], used / limits.credits)
    yield from (waiting, commits, failures, credits)
