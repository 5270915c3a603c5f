"""Telemetry as Prometheus families, built at scrape time from the book; labels: worker (and source).

A worker without telemetry, or whose source does not report a value, has no sample for it: an absent
sample means "unknown", never zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from interlock.runtime.telemetry.collector import TelemetryBook, WorkerTelemetry

Read = Callable[[WorkerTelemetry], float | int | None]


def _gpu(attr: str) -> Read:
    def read(w: WorkerTelemetry) -> float | int | None:
        gpu = w.gpu
        return None if gpu is None else getattr(gpu, attr)

    return read


def _host(attr: str) -> Read:
    def read(w: WorkerTelemetry) -> float | int | None:
        host = w.host
        return None if host is None else getattr(host, attr)

    return read


GAUGES: tuple[tuple[str, str, Read], ...] = (
    (
        "interlock_worker_memory_used_bytes",
        "Host memory in use on the worker's machine.",
        _host("used_bytes"),
    ),
    ("interlock_worker_memory_total_bytes", "Host memory of the worker's machine.", _host("total_bytes")),
    (
        "interlock_worker_vram_used_bytes",
        "GPU memory in use (system memory on a unified-memory box).",
        lambda w: w.vram()[0],
    ),
    (
        "interlock_worker_vram_total_bytes",
        "GPU memory (system memory on a unified-memory box).",
        lambda w: w.vram()[1],
    ),
    ("interlock_worker_gpu_utilization_percent", "GPU utilisation, 0-100.", _gpu("utilization_percent")),
    ("interlock_worker_gpu_temperature_celsius", "GPU temperature.", _gpu("temperature_celsius")),
    ("interlock_worker_gpu_power_watts", "GPU power draw.", _gpu("power_watts")),
    ("interlock_worker_gpu_power_limit_watts", "GPU power limit.", _gpu("power_limit_watts")),
)


def families(book: TelemetryBook | None) -> Iterator[Metric]:
    workers = list(book) if book is not None else []
    for name, documentation, read in GAUGES:
        family = GaugeMetricFamily(name, documentation, labels=["worker"])
        for w in workers:
            value = read(w)
            if value is not None:
                family.add_metric([w.target.worker], float(value))
        yield family
    reads = CounterMetricFamily(
        "interlock_telemetry_reads",
        "Telemetry reads by worker, source (nvidia_smi, host_memory, url), result (ok, error class).",
        labels=["worker", "source", "result"],
    )
    for w in workers:
        for source, state in sorted(w.sources.items()):
            for result, count in sorted(state.results.items()):
                reads.add_metric([w.target.worker, source, result], float(count))
    yield reads
