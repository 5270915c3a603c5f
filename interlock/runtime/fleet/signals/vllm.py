"""vLLM: ``GET /metrics``. ``vllm:num_requests_running`` and ``vllm:num_requests_waiting`` (gauges, one
sample per engine), ``vllm:kv_cache_usage_perc`` (0 to 1, despite the name; before V1
``vllm:gpu_cache_usage_perc``), as vLLM's production-metrics documentation names them."""

from __future__ import annotations

from collections.abc import Mapping

from interlock.runtime.fleet.signals.base import ServerKind, ServerLoad, highest, total
from interlock.runtime.fleet.signals.exposition import samples

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV = "vllm:kv_cache_usage_perc"
KV_BEFORE_V1 = "vllm:gpu_cache_usage_perc"
NAMES = frozenset((RUNNING, WAITING, KV, KV_BEFORE_V1))


def read(bodies: Mapping[str, bytes]) -> ServerLoad:
    found = samples(bodies["/metrics"].decode("utf-8", "replace"), NAMES)
    if RUNNING not in found and WAITING not in found:
        raise ValueError("no vllm:num_requests_* in /metrics")
    return ServerLoad(
        running=total(found.get(RUNNING)),
        waiting=total(found.get(WAITING)),
        kv_used=highest(found.get(KV) or found.get(KV_BEFORE_V1)),
    )


KIND = ServerKind("vllm", ("/metrics",), read)
