"""``count_tokens`` counts as the server that would answer counts (issue 38 item 6): llama-server's
``/apply-template`` and ``/tokenize``, vLLM's ``/tokenize``, an Anthropic upstream's own
``count_tokens``; cached, so the same prompt costs one round trip; taught to the count book, so the
chat request that follows is counted so with no call; a server with no tokenizer: the estimate as
learned there, and it is not asked again for a while. The fakes' tokenizers are
``interlock.testing.fake_openai.tokenize`` (real servers: ``bench/context_estimate.py``)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.app.gateway import Gateway
from interlock.runtime.books.learned import REPORTING_FLOOR
from interlock.runtime.upstream.tokenize import FAILED_S, LLAMA, NO_TOKENIZER_S, NONE, Tokenizers
from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_openai import FakeOpenAI, chatml, tokenize
from tests.runtime.conftest import build

CLAUDE = orjson.loads(
    (
        Path(__file__).resolve().parents[2] / "fixtures" / "clients" / "claude-code-2.1.197_v1_messages.json"
    ).read_bytes()
)
CONFIG = """\
version: 1
server: {{default_alias: t/llama, alias_namespace: t/}}
providers:
  llama: {{kind: openai, base_url: "{llama}", probe: false}}
  vllm: {{kind: openai, base_url: "{vllm}", probe: false}}
  cloud: {{kind: openai, base_url: "{cloud}", probe: false}}
  claude: {{kind: anthropic, base_url: "{claude}", probe: false}}
aliases:
  t/llama: {{description: a llama-server, chain: [llama/smol]}}
  t/vllm: {{description: a vLLM server, chain: [vllm/qwen]}}
  t/cloud: {{description: no tokenizer, chain: [cloud/gpt]}}
  t/claude: {{description: an Anthropic upstream, chain: [claude/sonnet]}}
"""
Fakes = tuple[FakeOpenAI, FakeOpenAI, FakeOpenAI, FakeAnthropic]


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    with (
        FakeOpenAI(name="llama", server="llama.cpp") as llama,
        FakeOpenAI(name="vllm", server="vllm") as vllm,
        FakeOpenAI(name="cloud") as cloud,
        FakeAnthropic(name="claude") as claude,
    ):
        yield llama, vllm, cloud, claude


def _gateway(plan_data: Callable[[str], dict[str, Any]], fakes: Fakes) -> Gateway:
    llama, vllm, cloud, claude = fakes
    text = CONFIG.format(llama=llama.base_url, vllm=vllm.base_url, cloud=cloud.base_url, claude=claude.url)
    return build_gateway(build(plan_data(text)))


def _count(gateway: Gateway, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    async def scenario() -> list[httpx.Response]:
        await gateway.startup()
        try:
            transport = httpx.ASGITransport(app=gateway)
            async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30) as http:
                headers = {"anthropic-version": "2023-06-01"}
                return [await http.post("/v1/messages/count_tokens", json=b, headers=headers) for b in bodies]
        finally:
            await gateway.shutdown()

    return asyncio.run(scenario())


def _claude(model: str) -> dict[str, Any]:
    body = {k: v for k, v in copy.deepcopy(CLAUDE["body"]).items() if k in ("messages", "system", "tools")}
    return {**body, "model": model}


def test_a_llama_server_counts_with_its_own_template_and_tokenizer_once_per_prompt(
    plan_data: Callable[[str], dict[str, Any]], fakes: Fakes
) -> None:
    llama = fakes[0]
    gateway = _gateway(plan_data, fakes)
    first, again = _count(gateway, [_claude("t/llama")] * 2)
    assert first.status_code == 200, first.text
    assert first.headers["x-interlock-counted"] == "server"
    assert first.json() == again.json()
    assert llama.tokenized == 2  # /apply-template and /tokenize, once: the second was cached
    counted = first.json()["input_tokens"]
    # the chat request that follows is counted as the server counted it, with no call (the count book)
    learned = gateway.parts.services.learned
    (text, schema), *_ = [(c, s) for c, s in _parts(gateway)]
    assert learned.counts.prompt("llama", "smol", text, schema, REPORTING_FLOOR) == pytest.approx(
        counted, rel=0.02
    )
    assert counted != text + schema  # not the raw estimate


def _parts(gateway: Gateway) -> list[tuple[int, int]]:
    from interlock.runtime.books.estimate import needs_of
    from interlock.runtime.wire import anthropic_caller as wire

    internal, _, _ = wire.internal_request(_claude("t/llama"), counting=True)
    needs = needs_of(internal, "chat", gateway.parts.live.plan.preflight)
    return [(needs.prompt_tokens - needs.schema_tokens, needs.schema_tokens)]


def test_vllm_and_an_anthropic_upstream_count_with_their_own(
    plan_data: Callable[[str], dict[str, Any]], fakes: Fakes
) -> None:
    _, vllm, _, claude = fakes
    hi = {"messages": [{"role": "user", "content": "Say hi, in three words."}]}
    vllm_count, claude_count = _count(
        _gateway(plan_data, fakes), [{**hi, "model": "t/vllm"}, {**hi, "model": "t/claude"}]
    )
    assert vllm_count.headers["x-interlock-counted"] == "server"
    assert vllm_count.json() == {"input_tokens": tokenize(chatml(hi["messages"], None))}
    assert vllm.tokenized == 1
    assert claude_count.headers["x-interlock-counted"] == "server"
    assert claude_count.json() == {
        "input_tokens": tokenize(orjson.dumps([None, hi["messages"], None]).decode())
    }
    assert any(r.path == "/v1/messages/count_tokens" for r in claude.requests)


def test_a_server_without_a_tokenizer_gets_the_estimate_and_is_not_asked_again(
    plan_data: Callable[[str], dict[str, Any]], fakes: Fakes
) -> None:
    cloud = fakes[2]
    hi = {"model": "t/cloud", "messages": [{"role": "user", "content": "Say hi."}]}
    first, again = _count(_gateway(plan_data, fakes), [hi, hi])
    assert first.headers["x-interlock-counted"] == again.headers["x-interlock-counted"] == "estimate"
    assert first.json() == again.json()
    tried = [r.path for r in cloud.requests]
    assert tried == ["/apply-template", "/tokenize"]  # 404 both: not asked again


def test_a_translated_stream_s_message_start_counts_as_learned_from_that_server(
    plan_data: Callable[[str], dict[str, Any]], fakes: Fakes
) -> None:
    """Issue 38: ``message_start`` reported the raw estimate although the server's count was known."""
    gateway = _gateway(plan_data, fakes)
    body = _claude("t/llama")

    async def scenario() -> tuple[int, bytes]:
        await gateway.startup()
        try:
            transport = httpx.ASGITransport(app=gateway)
            async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30) as http:
                headers = {"anthropic-version": "2023-06-01"}
                counted = await http.post("/v1/messages/count_tokens", json=body, headers=headers)
                streamed = {**body, "max_tokens": 16, "stream": True}
                answer = await http.post("/v1/messages", json=streamed, headers=headers)
                return counted.json()["input_tokens"], answer.content
        finally:
            await gateway.shutdown()

    counted, events = asyncio.run(scenario())
    start = next(
        line for line in events.split(b"\n") if line.startswith(b"data: ") and b"message_start" in line
    )
    reported = orjson.loads(start[6:])["message"]["usage"]["input_tokens"]
    assert reported == pytest.approx(counted, rel=0.02)


def test_a_server_whose_tokenizer_failed_is_not_asked_again_for_a_minute() -> None:
    """A 401 or a timeout is no answer about the tokenizer, but asking again on every count_tokens
    would make each wait for it (5 s a call for a server that times out)."""
    now = [0.0]
    tokenizers = Tokenizers(clock=lambda: now[0])
    tokenizers.failed("http://box:8080")
    assert tokenizers.style("http://box:8080") == NONE
    now[0] = FAILED_S + 1
    assert tokenizers.style("http://box:8080") is None  # asked again
    tokenizers.found("http://box:8080", NONE)
    now[0] += FAILED_S + 1
    assert tokenizers.style("http://box:8080") == NONE  # one with none: for NO_TOKENIZER_S
    now[0] += NO_TOKENIZER_S
    assert tokenizers.style("http://box:8080") is None
    tokenizers.found("http://box:8080", LLAMA)
    now[0] += 10 * NO_TOKENIZER_S
    assert tokenizers.style("http://box:8080") == LLAMA
