"""Prometheus metrics of one gateway process, in a registry of its own (no module-level state).

The request path only bumps plain numbers: a labelled child is one dictionary lookup away, a counter
increment is an addition and a histogram observation a bisection, with no locks (the event loop is the
only writer). prometheus_client renders them at scrape time, beside the gauges worked out from the live
state then (``scrape.py``, with what they read: ``state_view.py``).

Label values are bounded: endpoints, status codes, alias names and candidate ids from the plan, error
classes. A raw ``provider/model`` that the plan does not list is labelled ``provider/*``; tenant, user
and request ids are never labels. Gauges that depend on time (circuits) are computed at scrape time.
Every metric is documented in docs/runtime.md (a test checks it).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from interlock.runtime.books.state_view import LedgerCounts as LedgerCounts
from interlock.runtime.books.state_view import SpentTally as SpentTally
from interlock.runtime.books.state_view import StateView as StateView

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)


class CounterChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class HistogramChild:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value


class CounterVec:
    """A labelled counter; ``labels(*values)`` is a dictionary lookup after the first call."""

    kind: type[CounterMetricFamily | GaugeMetricFamily] = CounterMetricFamily

    def __init__(self, name: str, documentation: str, labelnames: list[str]) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self.children: dict[tuple[str, ...], CounterChild] = {}

    def labels(self, *values: str) -> CounterChild:
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = CounterChild()
        return child

    def family(self) -> Metric:
        family = self.kind(self.name, self.documentation, labels=self.labelnames)
        for values, child in list(self.children.items()):
            family.add_metric(list(values), child.value)
        return family


class Gauge:
    """One unlabelled gauge the event loop sets (``set`` is an assignment)."""

    __slots__ = ("documentation", "name", "value")

    def __init__(self, name: str, documentation: str) -> None:
        self.name, self.documentation, self.value = name, documentation, 0.0

    def set(self, value: float) -> None:
        self.value = value

    def family(self) -> Metric:
        return GaugeMetricFamily(self.name, self.documentation, value=self.value)


class GaugeVec(CounterVec):
    """A labelled gauge the event loop moves (``labels(...).inc(-1)`` goes down)."""

    kind = GaugeMetricFamily


class HistogramVec:
    def __init__(
        self, name: str, documentation: str, labelnames: list[str], buckets: tuple[float, ...]
    ) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self.buckets = buckets
        self.children: dict[tuple[str, ...], HistogramChild] = {}

    def labels(self, *values: str) -> HistogramChild:
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = HistogramChild(self.buckets)
        return child

    def family(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in list(self.children.items()):
            cumulative, buckets = 0, []
            for bound, count in zip((*self.buckets, float("inf")), child.counts, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(cumulative)))
            family.add_metric(list(values), buckets, child.total)
        return family


class Metrics:
    """The process's metrics, built in groups by what they count; ``families`` lists them for exposition."""

    def __init__(self, view: StateView) -> None:
        self.view = view  # the live state its gauges read (the upstream client's strays are said there)
        self._count_answers()
        self._count_upstream_calls()
        self._count_process()
        self._count_background()
        self._time_requests()
        self._queue_for_slots()
        exposed = (CounterVec, Gauge, HistogramVec)  # in the order made
        self._exposed = tuple(v for v in vars(self).values() if isinstance(v, exposed))
        self._registry: CollectorRegistry | None = None

    @property
    def registry(self) -> CollectorRegistry:
        """The families above and the gauges a scrape reads off the live state (``scrape.py``: made by the
        first scrape, in the ops app)."""
        if self._registry is None:
            from interlock.runtime.books.scrape import registry

            self._registry = registry(self.view, self.families)
        return self._registry

    def _count_answers(self) -> None:
        """What requests came to: answers, the candidates that gave them, moves and cut streams."""
        self.requests = CounterVec(
            "interlock_requests", "Requests answered, by endpoint and HTTP status.", ["endpoint", "status"]
        )
        self.alias_resolved = CounterVec(
            "interlock_alias_resolved",
            "Requests answered, by the alias asked for and the candidate that answered.",
            ["alias", "candidate"],
        )
        self.fallback = CounterVec(
            "interlock_fallback",
            "Moves from one candidate to the next, by reason (an error class or a skip reason).",
            ["from_candidate", "to_candidate", "reason"],
        )
        self.preflight = CounterVec(
            "interlock_preflight_misfits",
            "Candidates that cannot serve a request's needs, by reason and action (skipped or observed).",
            ["candidate", "reason", "action"],
        )
        self.stream_aborted = CounterVec(
            "interlock_stream_aborted",
            "Streams that ended with an error event after the first byte had reached the client.",
            ["reason"],
        )
        self.stream_resumed = CounterVec(
            "interlock_stream_resumed",
            "Streams cut after their first byte that went on from a replica of the same model (an alias's "
            "`resume: same_model`), by the candidate that carried on.",
            ["candidate"],
        )
        self.client_disconnects = CounterVec(
            "interlock_client_disconnects",
            "Requests whose client went away before the answer was complete.",
            ["endpoint"],
        )

    def _count_upstream_calls(self) -> None:
        """What the calls to upstreams met: errors, retries, resends, strays, clamped usage."""
        self.upstream_errors = CounterVec(
            "interlock_upstream_errors",
            "Failed upstream calls, by candidate and error class.",
            ["candidate", "error_class"],
        )
        self.upstream_retries = CounterVec(
            "interlock_upstream_retries",
            "Calls made again on the same candidate after a failure safe to repeat, by candidate and the "
            "error class that was retried.",
            ["candidate", "error_class"],
        )
        self.upstream_resends = CounterVec(
            "interlock_upstream_resends",
            "Upstream requests sent a second time, by endpoint: not a byte had gone out on the first "
            "connection (found closed at the write). A written request is never sent again.",
            ["endpoint"],
        )
        self.upstream_strays = CounterVec(
            "interlock_upstream_strays",
            "Times an upstream was caught sending bytes nobody asked for (a second answer, bytes on an idle "
            "connection), by endpoint: its connections then serve one exchange each for 5 minutes.",
            ["endpoint"],
        )
        self.usage_clamped = CounterVec(
            "interlock_upstream_usage_clamped",
            "Answers whose usage claimed more tokens than one answer can hold (100 million), by candidate: "
            "cut to that bound before the ledger, the tokens per minute and the learned estimates saw it.",
            ["candidate"],
        )

    def _count_process(self) -> None:
        """The process's own life: plan reloads and client connections."""
        self.plan_reloads = CounterVec(
            "interlock_plan_reloads", "Plan reloads (SIGHUP), by result: loaded or refused.", ["result"]
        )
        self.connections_closed = CounterVec(
            "interlock_connections_closed",
            "Client connections the gateway closed itself, by reason: header_timeout, body_timeout, "
            "evicted (idle, at max_connections), over_limit (refused with 503), websocket (refused), "
            "headers_too_large (431), invalid_host (400).",
            ["reason"],
        )
        self.connections_open = Gauge("interlock_connections_open", "Client connections open now.")

    def _count_background(self) -> None:
        """Work done outside the request path: probes, circuit checks, metadata fetches, warm-ups."""
        self.probes = CounterVec(
            "interlock_probes", "Background probes, by endpoint and result.", ["endpoint", "result"]
        )
        self.circuit_checks = CounterVec(
            "interlock_circuit_checks",
            "Active checks of a candidate while its circuit is open (runtime/books/recovery.py), by "
            "candidate and result (ok or failed).",
            ["candidate", "result"],
        )
        self.metadata_fetches = CounterVec(
            "interlock_metadata_fetches",
            "Live metadata fetches (Ollama's /api/ps, /api/tags, /api/show; servers' /metrics, /slots), by "
            "endpoint, path and result.",
            ["endpoint", "path", "result"],
        )
        self.warmups = CounterVec(
            "interlock_warmups",
            "Warm-up loads of placed models (routing.placement.warm), by endpoint and result (ok or an "
            "error class).",
            ["endpoint", "result"],
        )

    def _time_requests(self) -> None:
        """Where a request's time goes: the whole answer, upstream waits, the gateway's own share."""
        self.request_seconds = HistogramVec(
            "interlock_request_duration_seconds",
            "Time from request to the last byte of the answer (streams: the whole stream).",
            ["endpoint"],
            LATENCY_BUCKETS,
        )
        self.upstream_seconds = HistogramVec(
            "interlock_upstream_duration_seconds",
            "Time waiting on one upstream call (streams: until the first chunk), by candidate.",
            ["candidate"],
            LATENCY_BUCKETS,
        )
        self.overhead_seconds = HistogramVec(
            "interlock_gateway_overhead_seconds",
            "The gateway's own time per request: total minus upstream waits and slot queueing "
            "(streams: until the first byte is sent).",
            ["endpoint"],
            OVERHEAD_BUCKETS,
        )

    def _queue_for_slots(self) -> None:
        """Waiting for a slot: how long, how many wait now, how many were turned away."""
        self.slot_wait_seconds = HistogramVec(
            "interlock_slot_wait_seconds",
            "Time requests waited in a worker's queue for a slot (requests that had to wait).",
            ["worker"],
            LATENCY_BUCKETS,
        )
        self.queue_wait_seconds = HistogramVec(
            "interlock_queue_wait_seconds",
            "Time requests waited for a slot (worker queue or fleet line), by tenant (`-`: none) and "
            "priority class (requests that waited and were handed one).",
            ["tenant", "class"],
            LATENCY_BUCKETS,
        )
        self.queue_waiting = GaugeVec(
            "interlock_queue_waiting",
            "Requests of this process waiting for a slot now, by tenant (`-`: none) and priority class.",
            ["tenant", "class"],
        )
        self.queue_turned_away = CounterVec(
            "interlock_queue_turned_away",
            "Requests refused with 429 after or instead of waiting for a slot (queue full, or past "
            "max_wait), by tenant (`-`: none) and priority class.",
            ["tenant", "class"],
        )

    def families(self) -> Iterator[Metric]:
        for vec in self._exposed:
            yield vec.family()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
