"""What the access log says a streamed answer's time went to (`duration_ms`), on an injected clock.

The lifecycle, the router and the journal read ``time.perf_counter``; here it is a clock that moves
only when the scripted upstream sends a chunk after its first, 0.15 s each, so every part of the
request's time is known exactly: the relay after the first chunk is the stream's 29 gaps, and none of
it is the gateway's own time (30,320 ms of "overhead" was logged for a 30 s stall: issue 40)."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.loaded.plan import load_plan
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.wire.base import ChatStream, Endpoint, Native
from tests.runtime.conftest import compile_text
from tests.runtime.scripted import ListStream, ScriptedAdapter

PLAN = """\
version: 1
server: {default_alias: chat}
providers:
  cloud: {kind: openai, base_url: "http://127.0.0.1:9/v1", api_key_env: CLOUD_KEY}
aliases:
  chat: {chain: [cloud/c1]}
"""
GAP_S = 0.15
WORDS = 30


class Clock:
    """``time.perf_counter`` for the test: still, unless a chunk moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SlowStream(ListStream):
    """Each chunk after the first comes ``GAP_S`` after the one before it, on ``clock``."""

    def __init__(self, items: list[dict[str, Any] | Exception], clock: Clock) -> None:
        super().__init__(items)
        self.clock = clock

    async def read(self) -> list[dict[str, Any]]:
        if 0 < self._read < len(self.items):
            self.clock.now += GAP_S
        return await super().read()


class SlowAdapter(ScriptedAdapter):
    def __init__(self, script: Mapping[str, Any], clock: Clock) -> None:
        super().__init__(script)
        self.clock = clock

    async def chat_stream(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> ChatStream:
        outcome = await self._outcome(endpoint, model, body)
        assert isinstance(outcome, list)
        return SlowStream(outcome, self.clock)


def chunk(word: str) -> dict[str, Any]:
    delta = {"role": "assistant", "content": word}
    choices = [{"index": 0, "delta": delta}]
    return {"id": "c", "object": "chat.completion.chunk", "model": "c1", "choices": choices}


async def streamed(tmp_path: Path, clock: Clock) -> dict[str, Any]:
    """One streamed chat through the gateway in-process; its access log line."""
    plan = load_plan(compile_text(tmp_path, PLAN), {"CLOUD_KEY": "k"})
    adapter = SlowAdapter({"c1": [chunk(f"w{i} ") for i in range(WORDS)]}, clock)

    async def adapters(_metrics: Any) -> tuple[Mapping[str, Adapter], Any]:
        async def close() -> None:
            return None

        return {"openai": adapter}, close

    log = io.BytesIO()
    gateway = build_gateway(plan, open_adapters=adapters, probes=False, access_log=log)
    await gateway.startup()
    body = orjson.dumps({"model": "chat", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    try:
        await gateway(scope, receive, send)
    finally:
        await gateway.shutdown()
    assert sent[0]["status"] == 200
    text = b"".join(m.get("body", b"") for m in sent[1:])
    assert text.count(b"data: ") >= WORDS  # every word went out
    (line,) = log.getvalue().splitlines()
    parsed: dict[str, Any] = orjson.loads(line)
    return parsed


def test_a_streams_relay_after_its_first_chunk_is_not_the_gateways_overhead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(time, "perf_counter", clock)
    line = asyncio.run(streamed(tmp_path, clock))
    took = line["duration_ms"]
    relay = GAP_S * (WORDS - 1) * 1000  # the 29 gaps after the first chunk, and nothing else
    assert took["relay"] == pytest.approx(relay, abs=0.01)
    assert (took["upstream"], took["queued"], took["overhead"]) == pytest.approx((0, 0, 0), abs=0.01)
    assert took["total"] == pytest.approx(relay, abs=0.01)
