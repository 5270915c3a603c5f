"""What a fake OpenAI-compatible server says of its own load, in the words of a real server kind.

``FakeOpenAI(server="vllm" | "sglang" | "llama.cpp")`` serves ``GET /metrics`` (and, as llama.cpp's
``llama-server --slots --metrics``, ``GET /slots``) rendered here from a ``Reported`` the test sets, with
the metric names, types and labels of each server's documentation (the same names
``runtime.fleet.signals`` reads; the recorded fixtures in ``tests/fixtures/signals`` hold the documents'
fuller shape). These answers skip the fake's faults and request log: a held chat request must not hold
the gateway's load reading too.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Reported:
    """The load a fake server reports; change it between probe rounds."""

    running: int = 0
    waiting: int = 0
    kv_used: float = 0.0
    slots: int = 1  # llama.cpp's /slots lists this many, the first ``running`` of them busy
    cached_tokens: int = 0


def _gauge(name: str, help_text: str, value: float, labels: str = "") -> str:
    return f"# HELP {name} {help_text}\n# TYPE {name} gauge\n{name}{labels} {float(value)}\n"


def metrics(server: str, load: Reported, model: str) -> bytes:
    """The ``/metrics`` text of a ``server`` kind reporting ``load``."""
    if server == "vllm":
        labels = f'{{engine="0",model_name="{model}"}}'
        text = (
            _gauge(
                "vllm:num_requests_running",
                "Number of requests in model execution batches.",
                load.running,
                labels,
            )
            + _gauge(
                "vllm:num_requests_waiting",
                "Number of requests waiting to be processed.",
                load.waiting,
                labels,
            )
            + _gauge(
                "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", load.kv_used, labels
            )
        )
    elif server == "sglang":
        labels = f'{{model_name="{model}"}}'
        text = (
            _gauge("sglang:num_running_reqs", "The number of running requests.", load.running, labels)
            + _gauge(
                "sglang:num_queue_reqs", "The number of requests in the waiting queue.", load.waiting, labels
            )
            + _gauge("sglang:token_usage", "The token usage.", load.kv_used, labels)
            + _gauge("sglang:num_used_tokens", "The number of used tokens.", load.cached_tokens, labels)
        )
    elif server == "llama.cpp":
        text = (
            _gauge(
                "llamacpp:kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.", load.kv_used
            )
            + _gauge("llamacpp:kv_cache_tokens", "KV-cache tokens.", load.cached_tokens)
            + _gauge("llamacpp:requests_processing", "Number of requests processing.", load.running)
            + _gauge("llamacpp:requests_deferred", "Number of requests deferred.", load.waiting)
        )
    else:
        raise ValueError(f"no such server kind: {server}")
    return text.encode()


def slots(load: Reported, n_ctx: int = 4096) -> bytes:
    """llama.cpp's ``/slots``: one object per slot (the fields the README shows that matter here)."""
    return orjson.dumps(
        [
            {
                "id": i,
                "id_task": i if i < load.running else -1,
                "n_ctx": n_ctx,
                "is_processing": i < load.running,
            }
            for i in range(load.slots)
        ]
    )
