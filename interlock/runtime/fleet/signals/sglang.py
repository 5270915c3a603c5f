"""SGLang (``--enable-metrics``): ``GET /metrics``. ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``
(gauges), ``sglang:token_usage`` (the KV pool's use, 0 to 1) and ``sglang:num_used_tokens``, as SGLang's
production-metrics documentation names them; with data parallelism there is one sample per rank.
``sglang:prompt_tokens_total`` and ``sglang:generation_tokens_total`` (counters) are its progress."""

from __future__ import annotations

from interlock.runtime.fleet.signals.base import Gauges, ServerKind

read = Gauges(
    running="sglang:num_running_reqs",
    waiting="sglang:num_queue_reqs",
    kv=("sglang:token_usage",),
    absent="no sglang:num_*_reqs in /metrics",
    cached_tokens="sglang:num_used_tokens",
    counters=("sglang:prompt_tokens_total", "sglang:generation_tokens_total"),
)
NAMES = read.names

KIND = ServerKind("sglang", ("/metrics",), read)
