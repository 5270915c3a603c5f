"""SGLang (``--enable-metrics``): ``GET /metrics``. ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``
(gauges), ``sglang:token_usage`` (the KV pool's use, 0 to 1) and ``sglang:num_used_tokens``, as SGLang's
production-metrics documentation names them; with data parallelism there is one sample per rank."""

from __future__ import annotations

from collections.abc import Mapping

from interlock.runtime.fleet.signals.base import ServerKind, ServerLoad, highest, total
from interlock.runtime.fleet.signals.exposition import samples

RUNNING = "sglang:num_running_reqs"
WAITING = "sglang:num_queue_reqs"
KV = "sglang:token_usage"
TOKENS = "sglang:num_used_tokens"
NAMES = frozenset((RUNNING, WAITING, KV, TOKENS))


def read(bodies: Mapping[str, bytes]) -> ServerLoad:
    found = samples(bodies["/metrics"].decode("utf-8", "replace"), NAMES)
    if RUNNING not in found and WAITING not in found:
        raise ValueError("no sglang:num_*_reqs in /metrics")
    return ServerLoad(
        running=total(found.get(RUNNING)),
        waiting=total(found.get(WAITING)),
        kv_used=highest(found.get(KV)),
        cached_tokens=total(found.get(TOKENS)),
    )


KIND = ServerKind("sglang", ("/metrics",), read)
