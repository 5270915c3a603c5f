"""Streaming: fallback only before the first byte; after it, a failure is an error event, not a truncation."""

from __future__ import annotations

import asyncio

import openai
import orjson
import pytest

from interlock.testing.faults import Fault
from tests.e2e.conftest import Fakes
from tests.e2e.harness import Served

HI = [{"role": "user", "content": "one two three four five"}]


def test_every_chunk_names_the_model_that_answered(gateway: Served) -> None:
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    raw = sdk.chat.completions.with_raw_response.create(model="e2e/default", messages=HI, stream=True)
    assert raw.headers["x-interlock-resolved"] == "box/llama3.2:3b"
    assert raw.headers["content-type"].startswith("text/event-stream")
    chunks = list(raw.parse())
    assert {c.model for c in chunks} == {"box/llama3.2:3b"}
    assert (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        == "Hello from box, model llama3.2:3b."
    )


def test_async_streaming_with_fallback_before_the_first_byte(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.set_fault(Fault.http_status(503, "overloaded"), model="a-pre")

    async def scenario() -> list[str]:
        sdk = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
        stream = await sdk.chat.completions.create(model="e2e/prestream", messages=HI, stream=True)
        models = [chunk.model async for chunk in stream]
        await sdk.close()
        return models

    assert set(asyncio.run(scenario())) == {"bravo/b-pre"}


def test_a_stream_cut_after_the_first_byte_ends_with_an_error_event_and_no_done(
    gateway: Served, fakes: Fakes
) -> None:
    fakes.alpha.set_fault(Fault.cut_stream(after_chunks=2), model="a-cut")
    before = gateway.metric("interlock_stream_aborted_total", reason="protocol")
    body = {"model": "e2e/cut", "messages": HI, "stream": True}
    with gateway.http.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["x-interlock-resolved"] == "alpha/a-cut"
        events = [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]
    assert "[DONE]" not in events
    assert len(events) == 3
    assert [orjson.loads(e)["model"] for e in events[:2]] == ["alpha/a-cut", "alpha/a-cut"]
    assert orjson.loads(events[-1]) == {
        "error": {
            "message": "the stream from alpha/a-cut broke after it had started (protocol); "
            "the answer is incomplete",
            "type": "server_error",
            "param": None,
            "code": "stream_aborted",
        }
    }
    assert sum(1 for r in fakes.bravo.requests if r.body and r.body.get("model") == "b-cut") == 0
    assert gateway.metric("interlock_stream_aborted_total", reason="protocol") == before + 1


def test_the_sdk_sees_a_failure_not_a_short_answer(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.set_fault(Fault.cut_stream(after_chunks=1), model="a-cut2")
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    seen: list[str] = []

    def consume() -> None:
        for chunk in sdk.chat.completions.create(model="e2e/cut2", messages=HI, stream=True):
            seen.append(chunk.model)

    with pytest.raises(openai.APIError, match=r"the stream from alpha/a-cut2 broke after it had started"):
        consume()
    assert seen == ["alpha/a-cut2"]


def test_an_endless_upstream_body_falls_back_and_an_endless_line_ends_the_stream(
    gateway: Served, fakes: Fakes
) -> None:
    """Issue 7, item 2: the plan caps a body at 1 MiB and a stream line at 64 KiB here."""
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    fakes.alpha.set_fault(Fault.endless(), model="a-endless")
    before = gateway.metric(
        "interlock_upstream_errors_total", candidate="alpha/a-endless", error_class="protocol"
    )
    answer = sdk.chat.completions.with_raw_response.create(model="e2e/endless", messages=HI)
    assert answer.headers["x-interlock-resolved"] == "bravo/b-endless"  # fell back before the first byte
    assert (
        gateway.metric("interlock_upstream_errors_total", candidate="alpha/a-endless", error_class="protocol")
        == before + 1
    )

    fakes.alpha.set_fault(Fault.endless(after_chunks=1), model="a-endless2")
    seen: list[str] = []

    def consume() -> None:
        for chunk in sdk.chat.completions.create(model="e2e/endless2", messages=HI, stream=True):
            seen.append(chunk.model)

    with pytest.raises(
        openai.APIError, match=r"^the stream from alpha/a-endless2 broke after it had started"
    ):
        consume()
    assert seen == ["alpha/a-endless2"]
    assert not any(r.body and r.body.get("model") == "b-endless2" for r in fakes.bravo.requests)
