"""A stream under a server that offers no ``interlock.stream_body`` extension (any ASGI server but
`interlock serve`; here httpx's in-process transport) is relayed through ASGI ``send``, whole."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import orjson

from interlock.commands.gateway import build_gateway
from interlock.testing.fake_openai import FakeOpenAI
from tests.runtime.conftest import build

CONFIG = """\
version: 1
server: {{default_alias: t/chat, alias_namespace: t/}}
providers:
  cloud: {{kind: openai, base_url: "{url}", api_key_env: CLOUD_KEY}}
aliases:
  t/chat: {{description: one cloud model, chain: [cloud/c1]}}
"""
BODY = {
    "model": "t/chat",
    "stream": True,
    "stream_options": {"include_usage": True},
    "messages": [{"role": "user", "content": "hi"}],
}


def test_a_stream_without_the_extension_goes_through_send(plan_data: Callable[[str], dict[str, Any]]) -> None:
    with FakeOpenAI(name="fake", api_key="sk-cloud-secret") as fake:
        gateway = build_gateway(build(plan_data(CONFIG.format(url=fake.base_url))), probes=False)

        async def scenario() -> httpx.Response:
            await gateway.startup()
            try:
                transport = httpx.ASGITransport(app=gateway)
                async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                    return await http.post("/v1/chat/completions", json=BODY)
            finally:
                await gateway.shutdown()

        response = asyncio.run(scenario())
    assert response.status_code == 200
    assert response.headers["x-interlock-resolved"] == "cloud/c1"
    events = [e.removeprefix("data: ") for e in response.text.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    assert {c["model"] for c in chunks} == {"cloud/c1"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello from fake, model c1."
    assert chunks[-1]["usage"]["completion_tokens"] == 5
