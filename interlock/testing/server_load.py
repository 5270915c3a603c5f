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
    recorded_slots: bytes | None = None  # a real server's /slots answer, served as it is when set


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
    """llama.cpp's ``/slots``: one object per slot, the fields the real server answers with while idle
    (``tests/fixtures/discover/llama-server/slots.json``), ``is_processing`` for the first ``running``;
    or ``recorded_slots`` as it is."""
    if load.recorded_slots is not None:
        return load.recorded_slots
    return orjson.dumps(
        [
            {"id": i, "n_ctx": n_ctx, "speculative": False, "is_processing": i < load.running}
            for i in range(load.slots)
        ]
    )


def props(load: Reported, model: str, n_ctx: int = 4096, tools: bool = False) -> bytes:
    """llama.cpp's ``/props``: the fields of the real server's answer that say what it serves
    (``tests/fixtures/discover/llama-server/props.json``): the context per slot, the slots, the model,
    what its chat template can do; the sampling defaults, the chat template and its tokens left out."""
    caps = dict.fromkeys(_TEMPLATE_CAPS, False) | {
        "supports_string_content": True,
        "supports_system_role": True,
    }
    caps.update(supports_tools=tools, supports_tool_calls=tools)
    return orjson.dumps(
        {
            "default_generation_settings": {"params": {"n_predict": -1}, "n_ctx": n_ctx},
            "total_slots": load.slots,
            "model_alias": model,
            "model_ftype": "Q4_1",
            "model_path": f"/models/{model}.gguf",
            "modalities": {"vision": False, "video": False, "audio": False},
            "endpoint_slots": True,
            "endpoint_props": False,
            "endpoint_metrics": True,
            "chat_template_caps": caps,
            "build_info": "b0-unknown",
            "is_sleeping": False,
        }
    )


_TEMPLATE_CAPS = (
    "supports_object_arguments",
    "supports_parallel_tool_calls",
    "supports_preserve_reasoning",
    "supports_reasoning_effort",
    "supports_string_content",
    "supports_system_role",
    "supports_tool_calls",
    "supports_tools",
    "supports_typed_content",
)


def llama_models(model: str, n_ctx: int = 4096) -> dict[str, object]:
    """llama.cpp's ``/v1/models``: OpenAI's list, each entry with the server's ``meta`` (its ``n_ctx``)
    (``tests/fixtures/discover/llama-server/v1_models.json``; its Ollama-style ``models`` list left out)."""
    meta = {"vocab_type": 2, "n_ctx": n_ctx, "n_ctx_train": 8192, "n_params": 134515008, "ftype": "Q4_1"}
    entry = {"id": model, "aliases": [model], "tags": [], "object": "model", "owned_by": "llamacpp"}
    return {"object": "list", "data": [{**entry, "created": 1796162644, "meta": meta}]}
