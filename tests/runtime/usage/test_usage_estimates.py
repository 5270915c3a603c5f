"""Usage is never silently zero (issue 22): when the upstream reports none, every surface's answer carries
interlock's estimate (the ledger's, which still counts the request as estimated); an Anthropic upstream's
``message_start`` input tokens are passed on in the Anthropic surface's own ``message_start``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from interlock.commands.gateway import build_gateway
from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.replies import Reply
from tests.runtime.conftest import build

CONFIG = """\
version: 1
server: {{default_alias: t/plain, alias_namespace: t/}}
providers:
  plain: {{kind: openai, base_url: "{plain}", probe: false}}
  claude: {{kind: anthropic, base_url: "{claude}", probe: false, api_key_env: CLOUD_KEY}}
aliases:
  t/plain: {{description: an upstream without usage, chain: [plain/p1]}}
  t/claude: {{description: anthropic, chain: [claude/c1]}}
"""
HI = [{"role": "user", "content": "hello there, how are you today?"}]
ASKS: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"messages": HI, "stream_options": {"include_usage": True}},
    "/v1/responses": {"input": HI},
    "/v1/messages": {"messages": HI, "max_tokens": 50},
    "/api/chat": {"messages": HI},
}


def _ask(plan_data: Callable[[str], dict[str, Any]], asks: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    with (
        FakeOpenAI(name="plain", reply=Reply(usage=False)) as plain,
        FakeAnthropic(name="claude", api_key="sk-cloud-secret") as claude,
    ):
        gateway = build_gateway(
            build(plan_data(CONFIG.format(plain=plain.base_url, claude=claude.url))), probes=False
        )

        async def scenario() -> list[bytes]:
            await gateway.startup()
            try:
                transport = httpx.ASGITransport(app=gateway)
                async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                    answers = [await http.post(path, json=body) for path, body in asks]
                    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
                    return [a.content for a in answers]
            finally:
                await gateway.shutdown()

        return asyncio.run(scenario())


def _counts(path: str, data: bytes) -> tuple[int, int]:
    """(prompt, completion) tokens as the surface reports them, answer or stream."""
    if path == "/api/chat":
        last = orjson.loads(data.strip().split(b"\n")[-1])
        return last["prompt_eval_count"], last["eval_count"]
    if data.startswith(b"{"):
        usage = orjson.loads(data)["usage"]
    else:
        events = [orjson.loads(line[6:]) for line in data.split(b"\n") if line.startswith(b"data: {")]
        usage = next(
            e.get("usage") or e.get("response", {}).get("usage")
            for e in reversed(events)
            if e.get("usage") or e.get("response", {}).get("usage")
        )
    if "prompt_tokens" in usage:
        return usage["prompt_tokens"], usage["completion_tokens"]
    return usage["input_tokens"], usage["output_tokens"]


@pytest.mark.parametrize("stream", [False, True])
def test_every_surface_shows_the_estimate_when_the_upstream_reports_none(
    plan_data: Callable[[str], dict[str, Any]], stream: bool
) -> None:
    asks = [(path, {"model": "t/plain", **body, "stream": stream}) for path, body in ASKS.items()]
    answers = _ask(plan_data, asks)
    for (path, _), data in zip(asks, answers, strict=True):
        prompt, completion = _counts(path, data)
        assert prompt > 0, (path, data)
        assert completion > 0, (path, data)


def test_an_anthropic_upstreams_input_tokens_reach_message_start(
    plan_data: Callable[[str], dict[str, Any]],
) -> None:
    (data,) = _ask(
        plan_data, [("/v1/messages", {"model": "t/claude", "messages": HI, "max_tokens": 50, "stream": True})]
    )
    start = next(orjson.loads(line[6:]) for line in data.split(b"\n") if b'"message_start"' in line)
    assert start["message"]["usage"]["input_tokens"] == 6  # the fake counts the words of the prompt
