"""vLLM: ``GET /metrics``. ``vllm:num_requests_running`` and ``vllm:num_requests_waiting`` (gauges, one
sample per engine), ``vllm:kv_cache_usage_perc`` (0 to 1, despite the name; before V1
``vllm:gpu_cache_usage_perc``), as vLLM's production-metrics documentation names them;
``vllm:prompt_tokens_total`` and ``vllm:generation_tokens_total`` (counters) are its progress
(``signals/progress.py``)."""

from __future__ import annotations

from interlock.runtime.fleet.signals.base import Gauges, ServerKind

read = Gauges(
    running="vllm:num_requests_running",
    waiting="vllm:num_requests_waiting",
    kv=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),  # the second: its name before V1
    absent="no vllm:num_requests_* in /metrics",
    counters=("vllm:prompt_tokens_total", "vllm:generation_tokens_total"),
)
NAMES = read.names

KIND = ServerKind("vllm", ("/metrics",), read)
