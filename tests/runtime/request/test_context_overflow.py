"""Context overflow, one rule (issue 22): whoever says the prompt is over its context, in whatever words,
the candidate's context is too small. The walk moves on (streamed or not) and says so in
X-Interlock-Skipped; the window named lowers that route's known context, so the next such request skips
it without a call; with nothing left, the caller gets 400 ``context_length_exceeded``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.app.gateway import Gateway
from interlock.runtime.base.errors import ClientError, ContextOverflow
from interlock.runtime.wire.error_bodies import error_for_object, error_for_status
from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import OVERFLOWS, Fault
from tests.runtime.conftest import build

CONFIG = """\
version: 1
server: {{default_alias: t/chat, alias_namespace: t/}}
providers:
  small: {{kind: openai, base_url: "{small}", probe: false}}
  big: {{kind: openai, base_url: "{big}", probe: false}}
  claude: {{kind: anthropic, base_url: "{claude}", probe: false, api_key_env: CLOUD_KEY}}
aliases:
  t/chat: {{description: small first, chain: [small/s1, big/b1]}}
  t/claude: {{description: anthropic first, chain: [claude/c1, big/b2]}}
  t/only: {{description: nothing larger, chain: [small/s2]}}
"""
HI = [{"role": "user", "content": "hi"}]
LONG = [{"role": "user", "content": "word " * 3000}]  # about 5,000 tokens by the gateway's estimate


@pytest.mark.parametrize("dialect", sorted(OVERFLOWS))
def test_every_dialect_is_a_context_overflow_with_its_numbers(dialect: str) -> None:
    status, error = OVERFLOWS[dialect](2048, 3000)
    found = error_for_status(status, {}, orjson.dumps(error), ["sk-secret"])
    assert isinstance(found, ContextOverflow), (dialect, found)
    assert found.window == 2048
    if dialect != "vllm":  # vLLM counts messages and completion together
        assert found.tokens == 3000
    inner = error["error"] if isinstance(error, dict) and "error" in error else error
    assert isinstance(error_for_object(inner, []), ContextOverflow)


@pytest.mark.parametrize("dialect", sorted(OVERFLOWS))
def test_an_overflows_absurd_numbers_are_not_believed(dialect: str) -> None:
    """Issue 39's border: a window or count past ``bounds.MAX_WINDOW_TOKENS`` (in a field or in the
    text) is unknown, not a window that locks the candidate out or a count no later candidate fits."""
    status, error = OVERFLOWS[dialect](2**31, 2**31)  # past 2**30; orjson writes it (64 bits)
    found = error_for_status(status, {}, orjson.dumps(error), [])
    assert isinstance(found, ContextOverflow), (dialect, found)
    assert (found.window, found.tokens) == (None, None)


def test_other_4xx_answers_stay_client_errors() -> None:
    body = orjson.dumps({"error": {"message": "temperature must be at most 2", "code": "invalid_value"}})
    assert type(error_for_status(400, {}, body, [])) is ClientError


@pytest.fixture
def fakes() -> Iterator[tuple[FakeOpenAI, FakeOpenAI, FakeAnthropic]]:
    with (
        FakeOpenAI(name="small") as small,
        FakeOpenAI(name="big") as big,
        FakeAnthropic(name="claude", api_key="sk-cloud-secret") as claude,
    ):
        yield small, big, claude


def _gateway(
    plan_data: Callable[[str], dict[str, Any]], small: FakeOpenAI, big: FakeOpenAI, claude: FakeAnthropic
) -> Gateway:
    return build_gateway(
        build(plan_data(CONFIG.format(small=small.base_url, big=big.base_url, claude=claude.url)))
    )


def _ask(
    gateway: Gateway, asks: list[dict[str, Any]], path: str = "/v1/chat/completions"
) -> list[httpx.Response]:
    async def scenario() -> list[httpx.Response]:
        await gateway.startup()
        try:
            transport = httpx.ASGITransport(app=gateway)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                return [await http.post(path, json=body) for body in asks]
        finally:
            await gateway.shutdown()

    return asyncio.run(scenario())


def _calls(fake: FakeOpenAI | FakeAnthropic, model: str) -> int:
    return sum(1 for r in fake.requests if isinstance(r.body, dict) and r.body.get("model") == model)


@pytest.mark.parametrize("stream", [False, True])
def test_an_overflow_moves_on_is_said_and_is_learned(
    plan_data: Callable[[str], dict[str, Any]],
    fakes: tuple[FakeOpenAI, FakeOpenAI, FakeAnthropic],
    stream: bool,
) -> None:
    small, big, claude = fakes
    small.set_fault(Fault.context_overflow("llama-cpp-python", 512, 1010), model="s1")
    gateway = build_gateway(
        build(plan_data(CONFIG.format(small=small.base_url, big=big.base_url, claude=claude.url)))
    )
    first, second = _ask(gateway, [{"model": "t/chat", "messages": LONG, "stream": stream}] * 2)
    for response in (first, second):
        assert response.status_code == 200, response.text
        assert response.headers["x-interlock-resolved"] == "big/b1"
        assert response.headers["x-interlock-skipped"] == (
            "small/s1 (context_too_small, called)" if response is first else "small/s1 (context_too_small)"
        )
    assert _calls(small, "s1") == 1  # the second request skipped it: its context is known now
    assert _calls(big, "b1") == 2


def test_a_short_prompt_still_goes_to_the_smaller_context(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeAnthropic]
) -> None:
    small, big, claude = fakes
    small.set_fault(Fault.context_overflow("vllm", 4096, 5010), model="s1", times=1)
    gateway = build_gateway(
        build(plan_data(CONFIG.format(small=small.base_url, big=big.base_url, claude=claude.url)))
    )
    long, short = _ask(gateway, [{"model": "t/chat", "messages": LONG}, {"model": "t/chat", "messages": HI}])
    assert long.headers["x-interlock-resolved"] == "big/b1"
    assert short.headers["x-interlock-resolved"] == "small/s1"
    assert "x-interlock-skipped" not in short.headers


def test_anthropic_words_move_on_too(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeAnthropic]
) -> None:
    small, big, claude = fakes
    claude.set_fault(Fault.context_overflow("anthropic", 200, 1010), model="c1")
    gateway = build_gateway(
        build(plan_data(CONFIG.format(small=small.base_url, big=big.base_url, claude=claude.url)))
    )
    (answer,) = _ask(gateway, [{"model": "t/claude", "messages": LONG, "stream": True}])
    assert answer.headers["x-interlock-resolved"] == "big/b2"
    assert answer.headers["x-interlock-skipped"] == "claude/c1 (context_too_small, called)"


def test_with_no_larger_context_left_the_caller_gets_context_length_exceeded(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeAnthropic]
) -> None:
    small, big, claude = fakes
    small.set_fault(Fault.context_overflow("openai", 512, 1010), model="s2")
    gateway = build_gateway(
        build(plan_data(CONFIG.format(small=small.base_url, big=big.base_url, claude=claude.url)))
    )
    answers = _ask(gateway, [{"model": "t/only", "messages": LONG, "stream": s} for s in (False, True)])
    for response in answers:
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "context_length_exceeded"
        assert "small/s2: context 512 (upstream said) on small" in error["message"]
    assert _calls(small, "s2") == 1  # the second was refused without a call
    # the one the server refused: its count (issue 38: the 400 quoted the gateway's 17,507 where the
    # server counted 6,466), and called, not skipped
    called = answers[0].json()["error"]["message"]
    assert called.startswith("this request is 1010 tokens by small/s2's server's own count; ")
    assert answers[0].headers["x-interlock-skipped"] == "small/s2 (context_too_small, called)"


def test_an_empty_200_stream_of_a_prompt_over_the_context_is_an_overflow_too(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeAnthropic]
) -> None:
    """llama-cpp-python's server answers a streamed prompt over its context with an empty 200: asked
    again, not streamed, it says why; the walk then treats it like any overflow."""
    small, big, claude = fakes
    small.set_fault(Fault.empty_stream(), model="s1", times=1)
    small.set_fault(Fault.context_overflow("llama-cpp-python", 512, 1010))  # what it says when asked again
    gateway = _gateway(plan_data, small, big, claude)
    (answer,) = _ask(gateway, [{"model": "t/chat", "messages": LONG, "stream": True}])
    assert answer.headers["x-interlock-resolved"] == "big/b1"
    assert answer.headers["x-interlock-skipped"] == "small/s1 (context_too_small, called)"
    asked = [r.body for r in small.requests if isinstance(r.body, dict)]
    assert [(body.get("stream"), body.get("max_tokens")) for body in asked] == [(True, None), (None, 1)]


def test_an_empty_200_stream_for_another_reason_stays_a_protocol_failure(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeAnthropic]
) -> None:
    small, big, claude = fakes
    small.set_fault(Fault.empty_stream(), model="s1", times=1)
    gateway = _gateway(plan_data, small, big, claude)
    (answer,) = _ask(gateway, [{"model": "t/chat", "messages": HI, "stream": True}])
    assert answer.headers["x-interlock-resolved"] == "big/b1"
    assert "x-interlock-skipped" not in answer.headers
    assert gateway.parts.live.health.candidate("small/s1").last_error_class == "protocol"
