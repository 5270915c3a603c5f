"""A real model behind interlock (issue 22): the same answer as the server gives directly, on every surface,
and every way a real server ends an answer badly told as it is.

At temperature 0 llama.cpp is deterministic given the same state of its prompt cache: the first answer
to a prompt (nothing cached) differs from the later ones (the prompt found in the cache). So each
comparison asks the server directly twice first (the warm-up, then the answer to compare), then asks
through interlock: the server is in the same state both times.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import anthropic
import httpx
import ollama
import openai
import orjson
import pytest

from tests.inference.conftest import Real

pytestmark = pytest.mark.timeout(900)

PROMPT = [{"role": "user", "content": "Name three colours."}]
TOKENS = 16


def direct(real: Real, **extra: Any) -> dict[str, Any]:
    body = {"model": "smollm2", "messages": PROMPT, "temperature": 0, "max_tokens": TOKENS, **extra}
    answer = httpx.post(f"{real.chat.url}/v1/chat/completions", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def warm(real: Real, **extra: Any) -> str:
    """The server's answer in the state interlock's request will find it: asked twice, the second kept."""
    direct(real, **extra)
    text: str = direct(real, **extra)["choices"][0]["message"]["content"]
    assert text
    return text


def sdk(real: Real) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{real.gateway.url}/v1", api_key="unused", max_retries=0, timeout=300)


def test_the_same_answer_directly_and_through_interlock_on_every_surface(real: Real) -> None:
    url = real.gateway.url
    expected = warm(real)
    raw = sdk(real).chat.completions.with_raw_response.create(
        model="real/chat",
        messages=PROMPT,
        temperature=0,
        max_tokens=TOKENS,  # type: ignore[arg-type]
    )
    assert raw.headers["x-interlock-resolved"] == "llama/smollm2"
    assert raw.headers["x-interlock-worker"] == "llama1"
    completion = raw.parse()
    assert completion.choices[0].message.content == expected
    assert completion.usage is not None
    assert completion.usage.completion_tokens == TOKENS

    assert warm(real) == expected
    response = sdk(real).responses.create(
        model="real/chat",
        input=PROMPT,
        temperature=0,
        max_output_tokens=TOKENS,  # type: ignore[arg-type]
    )
    assert response.output_text == expected
    assert response.usage is not None
    assert response.usage.output_tokens == TOKENS

    assert warm(real) == expected
    claude = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=300)
    message = claude.messages.create(  # this SDK no longer takes `temperature` itself
        model="real/chat",
        messages=PROMPT,
        max_tokens=TOKENS,
        extra_body={"temperature": 0},  # type: ignore[arg-type]
    )
    assert message.content[0].text == expected  # type: ignore[union-attr]
    assert message.stop_reason == "max_tokens"
    # llama-server says how much of the prompt came from its cache (the warm-up's): Anthropic's usage
    # counts those apart, as cache reads, and input_tokens as the rest
    usage = message.usage
    assert usage.cache_read_input_tokens
    assert (usage.input_tokens + usage.cache_read_input_tokens, usage.output_tokens) == (
        completion.usage.prompt_tokens,
        TOKENS,
    )

    assert warm(real) == expected
    native = ollama.Client(host=url, timeout=300).chat(
        model="real/chat", messages=PROMPT, options={"temperature": 0, "num_predict": TOKENS}, stream=False
    )
    assert native.message.content == expected
    assert native.eval_count == TOKENS


def test_streams_give_the_same_text_and_end_with_their_finish(real: Real) -> None:
    expected = warm(real)
    chunks = list(
        sdk(real).chat.completions.create(
            model="real/chat",
            messages=PROMPT,  # type: ignore[arg-type]
            temperature=0,
            max_tokens=TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == expected
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert {c.model for c in chunks} == {"llama/smollm2"}

    assert warm(real) == expected
    claude = anthropic.Anthropic(base_url=real.gateway.url, api_key="unused", max_retries=0, timeout=300)
    with claude.messages.stream(
        model="real/chat",
        messages=PROMPT,
        max_tokens=TOKENS,
        extra_body={"temperature": 0},  # type: ignore[arg-type]
    ) as stream:
        assert "".join(stream.text_stream) == expected
        final = stream.get_final_message()
    assert final.stop_reason == "max_tokens"
    assert final.usage.output_tokens > 0  # the server's stream has no usage: interlock's estimate
    assert final.usage.input_tokens > 0

    assert warm(real) == expected
    parts = list(
        ollama.Client(host=real.gateway.url, timeout=300).chat(
            model="real/chat", messages=PROMPT, options={"temperature": 0, "num_predict": TOKENS}, stream=True
        )
    )
    assert "".join(p.message.content or "" for p in parts) == expected
    assert parts[-1].done is True
    assert parts[-1].done_reason == "length"


def test_stop_and_max_tokens_reach_the_server(real: Real) -> None:
    expected = warm(real)
    word = expected.split()[2]  # the answer stops just before its third word
    stopped = warm(real, stop=[word])
    assert word not in stopped
    assert expected.startswith(stopped.rstrip())
    answer = sdk(real).chat.completions.create(
        model="real/chat",
        messages=PROMPT,
        temperature=0,
        max_tokens=TOKENS,
        stop=[word],  # type: ignore[arg-type]
    )
    assert answer.choices[0].message.content == stopped
    assert answer.choices[0].finish_reason == "stop"

    short = sdk(real).chat.completions.create(
        model="real/chat",
        messages=PROMPT,
        temperature=0,
        max_tokens=3,  # type: ignore[arg-type]
    )
    assert short.choices[0].finish_reason == "length"
    assert short.usage is not None
    assert short.usage.completion_tokens == 3


def test_embeddings_are_the_servers_own_vector_on_both_surfaces(real: Real) -> None:
    """llama-server pools SmolLM2's token vectors itself (``--pooling mean``: the GGUF names none, and
    "none" is refused on its OpenAI route), one vector per input; interlock answers that vector as it is.
    (Mean-pooling a per-token answer, llama-cpp-python's, is held in tests/runtime/upstream's fakes.)"""
    body = {"model": "smollm2", "input": ["hello world"]}
    raw = httpx.post(f"{real.embed.url}/v1/embeddings", json=body, timeout=300).json()
    vector = raw["data"][0]["embedding"]
    assert isinstance(vector[0], float)
    through = sdk(real).embeddings.create(model="real/embed", input=["hello world"])
    assert len(through.data) == 1
    got = through.data[0].embedding
    assert all(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6) for a, b in zip(got, vector, strict=True))
    native = ollama.Client(host=real.gateway.url, timeout=300).embed(
        model="real/embed", input=["hello world"]
    )
    assert len(native.embeddings) == 1
    pairs = zip(native.embeddings[0], vector, strict=True)
    assert all(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6) for a, b in pairs)


def test_a_prompt_over_the_context_moves_on_streamed_or_not(real: Real) -> None:
    long = [{"role": "user", "content": "word " * 800}]  # about 800 tokens; the server holds 512
    for stream in (False, True):
        body = {"model": "real/overflow", "messages": long, "max_tokens": 8, "stream": stream}
        answer = real.gateway.http.post("/v1/chat/completions", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-interlock-resolved"] == "backup/b-overflow"
        if not stream:  # the first: asked, and it said so (its window: 512)
            assert answer.headers["x-interlock-skipped"] == "llama/smollm2 (context_too_small, called)"
        else:  # not asked again: skipped (its counts learned) or deferred after the backup (not yet)
            assert answer.headers.get("x-interlock-skipped") in (None, "llama/smollm2 (context_too_small)")
    only = real.gateway.http.post(
        "/v1/chat/completions", json={"model": "real/chat", "messages": long, "max_tokens": 8}
    )
    assert only.status_code == 400
    assert only.json()["error"]["code"] == "context_length_exceeded"
    assert "context 512 (upstream said)" in only.json()["error"]["message"]


def test_count_tokens_is_the_server_s_own_count_before_any_answer(real: Real) -> None:
    """Issue 38: ``count_tokens`` answered the estimate; now it asks the server (``/apply-template``,
    ``/tokenize``), and the chat request that follows is counted exactly so by the server."""
    system = "You are a careful assistant. Answer in one short sentence. " * 3
    messages = [{"role": "user", "content": "Name three colours, and say why the sky is blue."}]
    counted = real.gateway.http.post(
        "/v1/messages/count_tokens",
        json={"model": "real/chat", "system": system, "messages": messages},
        headers={"anthropic-version": "2023-06-01"},
    )
    assert counted.status_code == 200, counted.text
    assert counted.headers["x-interlock-counted"] == "server"
    chat = [{"role": "system", "content": system}, *messages]
    body = {"model": "smollm2", "messages": chat, "max_tokens": 1}
    answer = httpx.post(f"{real.chat.url}/v1/chat/completions", json=body, timeout=300)
    assert counted.json()["input_tokens"] == answer.json()["usage"]["prompt_tokens"]


async def _streams(url: str, model: str, count: int) -> list[tuple[str, str, list[Any]]]:
    """``count`` streams at once: each one's resolved candidate, text and decoded events.

    Who answered is the `X-Interlock-Resolved` header, or, when a stream waited in the slot's line
    longer than `server.stream_keepalive` and its head went out before anyone had answered (no header
    then, runtime/request/keepalive.py), the `model` every chunk names: both must say one candidate."""

    async def one(http: httpx.AsyncClient, index: int) -> tuple[str, str, list[Any]]:
        ask = [{"role": "user", "content": f"Count from one to ten, in words ({index})."}]
        body = {"model": model, "messages": ask, "temperature": 0, "max_tokens": 24, "stream": True}
        async with http.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
            assert response.status_code == 200, await response.aread()
            lines = [line async for line in response.aiter_lines() if line.startswith("data: ")]
        events = [line[6:] if line == "data: [DONE]" else orjson.loads(line[6:]) for line in lines]
        text = "".join(
            e["choices"][0]["delta"].get("content") or ""
            for e in events
            if isinstance(e, dict) and e.get("choices")
        )
        named = {e["model"] for e in events if isinstance(e, dict) and "model" in e}
        assert len(named) == 1, named
        header = response.headers.get("x-interlock-resolved")
        assert header in (None, *named), (header, named)
        return named.pop(), text, events

    async with httpx.AsyncClient(timeout=600) as http:
        return list(await asyncio.gather(*(one(http, i) for i in range(count))))


def test_three_concurrent_streams_on_one_slot_all_complete_with_text(real: Real) -> None:
    for resolved, text, events in asyncio.run(_streams(real.gateway.url, "real/chat", 3)):
        assert resolved == "llama/smollm2"
        assert text
        assert events[-1] == "[DONE]"
        assert any(
            isinstance(e, dict) and e.get("choices") and e["choices"][0].get("finish_reason") for e in events
        )


def test_concurrent_streams_on_a_box_without_gateway_slots_all_complete(real: Real) -> None:
    """llama-server defers what its slots cannot run (``llamacpp:requests_deferred``) and runs it when a
    slot frees: three streams sent at once to one slot, with no gateway limit, all end with text."""
    real.bare.start()
    try:
        streams = asyncio.run(_streams(real.gateway.url, "real/bare", 3))
    finally:
        real.bare.stop()
    for resolved, text, events in streams:
        assert resolved == "bare/smollm2"
        assert text, events
        assert events[-1] == "[DONE]"


def test_a_server_killed_mid_stream_and_then_before_a_request(real: Real) -> None:
    doomed = real.doomed.start()
    body = {"model": "real/doomed", "messages": PROMPT, "temperature": 0, "max_tokens": 400, "stream": True}
    with real.gateway.http.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.headers["x-interlock-resolved"] == "doomed/smollm2"
        lines = response.iter_lines()
        first = next(line for line in lines if line.startswith("data: ") and '"content"' in line)
        assert first
        doomed.kill()
        rest = [line[6:] for line in lines if line.startswith("data: ")]
    assert "[DONE]" not in rest
    assert orjson.loads(rest[-1])["error"]["code"] == "stream_aborted"

    after = real.gateway.http.post("/v1/chat/completions", json={**body, "stream": False})
    assert after.status_code == 200
    assert after.headers["x-interlock-resolved"] == "backup/b-doomed"
