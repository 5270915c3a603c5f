"""Capability preflight and the context guard through a real `interlock serve`, with the real openai SDK.

Two fake Ollama workers report live metadata (capabilities, model maxima, Modelfile `num_ctx`, loaded
contexts); a third has its metadata endpoints down. The gateway learns all of it in its probe round,
before it is ready, and skips what cannot fit without calling it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.e2e.harness import Served

LLAMA = ModelSpec("llama3.2:3b", ("completion", "tools"), context_length=131072)
GEMMA = ModelSpec("gemma3:12b", ("completion", "vision"), context_length=131072, family="gemma3")
QWEN_8K = ModelSpec(
    "qwen3:8b", ("completion", "tools", "thinking"), context_length=131072, loaded_context=8192
)
QWEN_64K = ModelSpec("qwen3:8b", ("completion", "tools", "thinking"), context_length=131072, num_ctx=65536)

CONFIG = """\
version: 1
server: {{alias_namespace: pf/, direct_models: allow}}
preflight: {{mode: {mode}, default_output_tokens: 256, margin_percent: 10, max_context_tokens: 200000}}
providers:
  gpu:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
    workers: [{{name: gpu1, url: "{gpu}", default_context_tokens: 8192}}]
  big:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
    workers: [{{name: big1, url: "{big}"}}]
  dark:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
    workers: [{{name: dark1, url: "{dark}"}}]
  cloud:
    kind: openai
    base_url: "{cloud}/v1"
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
health: {{probe_interval: 1s, probe_timeout: 900ms, failure_threshold: 1, open_for: 60s}}
aliases:
  pf/vision: {{chain: [gpu/llama3.2:3b, gpu/gemma3:12b]}}
  pf/tools: {{chain: [gpu/gemma3:12b, gpu/llama3.2:3b]}}
  pf/long: {{chain: [gpu/qwen3:8b, big/qwen3:8b]}}
  pf/small: {{chain: [gpu/qwen3:8b, gpu/gemma3:12b]}}
  pf/think: {{chain: [gpu/llama3.2:3b, gpu/qwen3:8b]}}
  pf/blind: {{chain: [dark/gemma3:12b, cloud/c-blind]}}
  pf/mixed: {{chain: [gpu/llama3.2:3b, cloud/c-down]}}
"""

IMAGE = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
SEEN = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": IMAGE}},
        ],
    }
]
HI = [{"role": "user", "content": "hi"}]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
LONG = [{"role": "user", "content": "lorem ipsum dolor sit amet " * 4500}]  # ~121k chars: ~35k tokens


@dataclass
class Fakes:
    gpu: FakeOllama
    big: FakeOllama
    dark: FakeOllama
    cloud: FakeOpenAI

    def config(self, mode: str) -> str:
        urls = {name: server.url for name, server in vars(self).items()}
        return CONFIG.format(mode=mode, **urls)


@pytest.fixture(scope="module")
def fakes() -> Iterator[Fakes]:
    servers = Fakes(
        gpu=FakeOllama(name="gpu", models=(LLAMA, GEMMA, QWEN_8K)).start(),
        big=FakeOllama(name="big", models=(QWEN_64K,)).start(),
        dark=FakeOllama(name="dark", models=(GEMMA,)).start(),
        cloud=FakeOpenAI(name="cloud").start(),
    )
    servers.dark.fail_metadata()
    try:
        yield servers
    finally:
        for server in vars(servers).values():
            server.stop()


def _serve(fakes: Fakes, folder: Path, mode: str) -> Served:
    config = folder / f"{mode}.yaml"
    config.write_text(fakes.config(mode))
    return Served(config, {}, folder / f"{mode}.log")


@pytest.fixture(scope="module")
def gateway(fakes: Fakes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = _serve(fakes, tmp_path_factory.mktemp("preflight"), "enforce")
    try:
        yield served
    finally:
        served.stop()


def client(gateway: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="caller-key", max_retries=0)


def last_chat(fake: FakeOllama, model: str) -> dict[str, Any]:
    bodies = [r.body for r in fake.requests if r.path == "/api/chat" and r.model == model]
    assert bodies, f"{model} was never called"
    body: dict[str, Any] = bodies[-1]
    return body


def test_a_vision_request_skips_a_text_only_first_member_without_calling_it(
    gateway: Served, fakes: Fakes
) -> None:
    before = fakes.gpu.calls("llama3.2:3b")
    raw = client(gateway).chat.completions.with_raw_response.create(model="pf/vision", messages=SEEN)  # type: ignore[arg-type]
    assert raw.headers["x-interlock-resolved"] == "gpu/gemma3:12b"
    assert raw.headers["x-interlock-skipped"] == "gpu/llama3.2:3b (lacks_vision)"
    assert fakes.gpu.calls("llama3.2:3b") == before
    assert last_chat(fakes.gpu, "gemma3:12b")["messages"][0]["images"]
    assert (
        gateway.metric(
            "interlock_fallback_total",
            from_candidate="gpu/llama3.2:3b",
            to_candidate="gpu/gemma3:12b",
            reason="lacks_vision",
        )
        >= 1
    )
    assert (
        gateway.metric(
            "interlock_preflight_misfits_total",
            candidate="gpu/llama3.2:3b",
            reason="lacks_vision",
            action="skipped",
        )
        >= 1
    )


def test_a_tools_request_skips_a_model_without_tools(gateway: Served, fakes: Fakes) -> None:
    before = fakes.gpu.calls("gemma3:12b")
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="pf/tools",
        messages=HI,
        tools=TOOLS,  # type: ignore[arg-type]
    )
    assert raw.headers["x-interlock-resolved"] == "gpu/llama3.2:3b"
    assert raw.headers["x-interlock-skipped"] == "gpu/gemma3:12b (lacks_tools)"
    assert raw.parse().choices[0].message.tool_calls[0].function.name == "get_weather"  # type: ignore[index]
    assert fakes.gpu.calls("gemma3:12b") == before


def test_a_40k_prompt_skips_a_model_loaded_with_8k_and_goes_where_it_fits(
    gateway: Served, fakes: Fakes
) -> None:
    assert fakes.gpu.loaded()["qwen3:8b"] == 8192  # /api/ps says so; its maximum is 131072
    before = fakes.gpu.calls("qwen3:8b")
    raw = client(gateway).chat.completions.with_raw_response.create(model="pf/long", messages=LONG)  # type: ignore[arg-type]
    assert raw.headers["x-interlock-resolved"] == "big/qwen3:8b"
    assert raw.headers["x-interlock-skipped"] == "gpu/qwen3:8b (context_too_small)"
    assert fakes.gpu.calls("qwen3:8b") == before
    # the worker is sent the context it was found to have (its Modelfile's), so nothing is truncated
    assert last_chat(fakes.big, "qwen3:8b")["options"]["num_ctx"] == 65536


def test_the_effective_context_is_sent_as_num_ctx(gateway: Served, fakes: Fakes) -> None:
    client(gateway).chat.completions.create(model="gpu/llama3.2:3b", messages=HI)  # type: ignore[arg-type]
    # not loaded, no Modelfile num_ctx: the worker's default_context_tokens
    assert last_chat(fakes.gpu, "llama3.2:3b")["options"]["num_ctx"] == 8192
    client(gateway).chat.completions.create(
        model="gpu/llama3.2:3b",
        messages=HI,
        extra_body={"options": {"num_ctx": 16384}},  # type: ignore[arg-type]
    )
    assert last_chat(fakes.gpu, "llama3.2:3b")["options"]["num_ctx"] == 16384  # the caller's, within limits


def test_when_nothing_fits_the_answer_is_400_context_length_exceeded(gateway: Served, fakes: Fakes) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client(gateway).chat.completions.create(model="pf/small", messages=LONG)  # type: ignore[arg-type]
    error = info.value.body
    assert isinstance(error, dict)
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    assert "the largest context available is 8192 tokens in pf/small" in error["message"]
    assert "this request needs about 3" in error["message"]  # ~38k tokens (121k bytes / 3.5)
    assert info.value.response.headers["x-interlock-skipped"] == (
        "gpu/qwen3:8b (context_too_small), gpu/gemma3:12b (context_too_small)"
    )


def test_a_raw_model_that_cannot_serve_the_request_is_400_at_once(gateway: Served, fakes: Fakes) -> None:
    before = fakes.gpu.calls("llama3.2:3b")
    with pytest.raises(openai.BadRequestError) as info:
        client(gateway).chat.completions.create(model="gpu/llama3.2:3b", messages=SEEN)  # type: ignore[arg-type]
    error = info.value.body
    assert isinstance(error, dict)
    assert error["code"] == "model_not_supported"
    assert error["message"] == (
        "no candidate of gpu/llama3.2:3b supports what this request needs (vision): "
        "gpu/llama3.2:3b: lacks vision"
    )
    assert fakes.gpu.calls("llama3.2:3b") == before


def test_required_reasoning_skips_a_model_that_does_not_think(gateway: Served, fakes: Fakes) -> None:
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="pf/think",
        messages=HI,
        reasoning_effort="high",  # type: ignore[arg-type]
    )
    assert raw.headers["x-interlock-resolved"] == "gpu/qwen3:8b"
    assert raw.headers["x-interlock-skipped"] == "gpu/llama3.2:3b (lacks_thinking)"
    assert last_chat(fakes.gpu, "qwen3:8b")["think"] == "high"
    message = raw.parse().choices[0].message
    assert message.model_extra is not None
    assert message.model_extra["reasoning"] == "Thinking (high) about it."


def test_optional_reasoning_is_dropped_for_a_model_that_does_not_think_and_said_so(
    gateway: Served, fakes: Fakes
) -> None:
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="pf/think",
        messages=HI,
        reasoning_effort="minimal",  # type: ignore[arg-type]
    )
    assert raw.headers["x-interlock-resolved"] == "gpu/llama3.2:3b"
    assert raw.headers["x-interlock-preflight"] == "think dropped for gpu/llama3.2:3b (not thinking-capable)"
    assert "think" not in last_chat(fakes.gpu, "llama3.2:3b")


def test_a_bad_num_ctx_is_refused_naming_the_limit(gateway: Served) -> None:
    sdk = client(gateway)
    with pytest.raises(openai.BadRequestError) as info:
        sdk.chat.completions.create(model="pf/long", messages=HI, extra_body={"options": {"num_ctx": -1}})  # type: ignore[arg-type]
    assert info.value.body == {
        "message": "`options.num_ctx` must be a positive integer, not -1",
        "type": "invalid_request_error",
        "param": "options.num_ctx",
        "code": "invalid_request",
    }
    with pytest.raises(openai.BadRequestError) as info:
        sdk.chat.completions.create(model="pf/long", messages=HI, extra_body={"options": {"num_ctx": 250000}})  # type: ignore[arg-type]
    assert isinstance(info.value.body, dict)
    assert info.value.body["message"] == (
        "`options.num_ctx` 250000 is above this gateway's limit of 200000 tokens "
        "(preflight.max_context_tokens)"
    )
    with pytest.raises(openai.BadRequestError) as info:  # within the gateway's cap, above the model's maximum
        sdk.chat.completions.create(model="pf/long", messages=HI, extra_body={"options": {"num_ctx": 150000}})  # type: ignore[arg-type]
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "context_length_exceeded"
    assert "options.num_ctx 150000 > limit 131072 on gpu@gpu1" in info.value.body["message"]
    assert "options.num_ctx 150000 > limit 131072 on big@big1" in info.value.body["message"]


def test_with_the_metadata_endpoints_down_requests_are_still_routed(gateway: Served, fakes: Fakes) -> None:
    raw = client(gateway).chat.completions.with_raw_response.create(model="pf/blind", messages=SEEN)  # type: ignore[arg-type]
    assert raw.headers["x-interlock-resolved"] == "dark/gemma3:12b"
    assert raw.headers["x-interlock-preflight"] == (
        "capabilities of dark/gemma3:12b unknown; context of dark/gemma3:12b on dark@dark1 unknown"
    )
    assert "x-interlock-skipped" not in raw.headers
    assert (
        gateway.metric(
            "interlock_metadata_fetches_total", endpoint="dark@dark1", path="/api/show", result="server_error"
        )
        >= 1
    )
    assert (
        gateway.metric("interlock_metadata_fetches_total", endpoint="gpu@gpu1", path="/api/ps", result="ok")
        >= 1
    )


def test_a_stream_skips_like_a_plain_request(gateway: Served, fakes: Fakes) -> None:
    with client(gateway).chat.completions.with_streaming_response.create(
        model="pf/vision",
        messages=SEEN,
        stream=True,  # type: ignore[arg-type]
    ) as response:
        assert response.headers["x-interlock-resolved"] == "gpu/gemma3:12b"
        assert response.headers["x-interlock-skipped"] == "gpu/llama3.2:3b (lacks_vision)"
        text = "".join(chunk.choices[0].delta.content or "" for chunk in response.parse() if chunk.choices)
    assert text == "Hello from gpu, model gemma3:12b."


def test_observe_mode_routes_as_before_and_reports(fakes: Fakes, tmp_path: Path) -> None:
    served = _serve(fakes, tmp_path, "observe")
    try:
        before = fakes.gpu.calls("llama3.2:3b")
        raw = client(served).chat.completions.with_raw_response.create(model="pf/vision", messages=SEEN)  # type: ignore[arg-type]
        assert raw.headers["x-interlock-resolved"] == "gpu/llama3.2:3b"
        assert raw.headers["x-interlock-preflight"] == "observe: gpu/llama3.2:3b lacks vision"
        assert "x-interlock-skipped" not in raw.headers
        assert fakes.gpu.calls("llama3.2:3b") == before + 1
        assert (
            served.metric(
                "interlock_preflight_misfits_total",
                candidate="gpu/llama3.2:3b",
                reason="lacks_vision",
                action="observed",
            )
            == 1
        )
        assert "preflight (observe): gpu/llama3.2:3b lacks vision" in served.log()
    finally:
        served.stop()


def test_the_metadata_report_says_what_is_known_and_where_it_came_from(gateway: Served) -> None:
    report = gateway.http.get("/v1/metadata").json()
    assert report["mode"] == "enforce"
    candidates = report["candidates"]
    assert candidates["gpu/qwen3:8b"]["gpu@gpu1"] == {
        "capabilities": ["completion", "thinking", "tools"],
        "capabilities_source": "live",
        "context_tokens": 8192,
        "context_source": "loaded",
    }
    assert candidates["big/qwen3:8b"]["big@big1"]["context_tokens"] == 65536
    assert candidates["big/qwen3:8b"]["big@big1"]["context_source"] in ("modelfile", "loaded")
    assert candidates["dark/gemma3:12b"]["dark@dark1"] == {
        "capabilities": None,
        "capabilities_source": "unknown",
        "context_tokens": None,
        "context_source": "unknown",
    }
    worker = report["workers"]["gpu@gpu1"]
    assert worker["installed"] == ["gemma3:12b", "llama3.2:3b", "qwen3:8b"]
    assert worker["models"]["gemma3:12b"] == {
        "capabilities": ["completion", "vision"],
        "max_context": 131072,
        "modelfile_num_ctx": None,
    }
    assert report["workers"]["dark@dark1"]["loaded"] is None


def test_a_misfit_beside_a_failure_is_a_503_whose_summary_says_both(gateway: Served, fakes: Fakes) -> None:
    """Only when *every* candidate was a misfit is it the request's fault (400); here one was down."""
    fakes.cloud.set_fault(Fault.http_status(500), model="c-down")
    with pytest.raises(openai.InternalServerError) as info:
        client(gateway).chat.completions.create(model="pf/mixed", messages=SEEN)  # type: ignore[arg-type]
    error = info.value.body
    assert isinstance(error, dict)
    assert error["code"] == "all_candidates_failed"
    assert re.fullmatch(  # the circuit's first half-open period: an eighth of 60 s, jittered down
        r"no candidate of pf/mixed could answer \(1 of 2 attempted\): "
        r"gpu/llama3.2:3b: skipped \(lacks_vision\); "
        r"cloud/c-down: server_error \[500\], circuit open for [678] s",
        error["message"],
    )
    assert "retry-after" not in info.value.response.headers  # the misfit never comes back by waiting
