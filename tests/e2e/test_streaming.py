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
    fakes.alpha.set_fault(Fault.cut_stream(after_chunks=2), model="a-cut2")  # the role chunk and one word
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    seen: list[str] = []

    def consume() -> None:
        for chunk in sdk.chat.completions.create(model="e2e/cut2", messages=HI, stream=True):
            seen.append(chunk.model)

    with pytest.raises(openai.APIError, match=r"the stream from alpha/a-cut2 broke after it had started"):
        consume()
    assert seen == ["alpha/a-cut2", "alpha/a-cut2"]


def test_a_stream_cut_after_its_role_chunk_falls_back(gateway: Served, fakes: Fakes) -> None:
    """The role-only first chunk says nothing: a stream cut (or ended) right after it has not started."""
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    for name, fault in (("rolecut", Fault.cut_stream(after_chunks=1)), ("rolecut2", Fault.unfinished(1))):
        fakes.alpha.set_fault(fault, model=f"a-{name}", times=1)
        chunks = list(sdk.chat.completions.create(model=f"e2e/{name}", messages=HI, stream=True))
        assert {chunk.model for chunk in chunks} == {f"bravo/b-{name}"}
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


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

    fakes.alpha.set_fault(Fault.endless(after_chunks=2), model="a-endless2")  # the role chunk, one word
    seen: list[str] = []

    def consume() -> None:
        for chunk in sdk.chat.completions.create(model="e2e/endless2", messages=HI, stream=True):
            seen.append(chunk.model)

    with pytest.raises(
        openai.APIError, match=r"^the stream from alpha/a-endless2 broke after it had started"
    ):
        consume()
    assert seen == ["alpha/a-endless2", "alpha/a-endless2"]
    assert not any(r.body and r.body.get("model") == "b-endless2" for r in fakes.bravo.requests)


def test_a_stream_that_ends_without_a_finish_reason_ends_in_an_error_on_every_surface(
    gateway: Served, fakes: Fakes
) -> None:
    """Issue 22: text, then the terminator with no finish reason. Every surface's caller gets its error
    event after the text, and none of the surface's success terminators."""
    asks = {
        "/v1/chat/completions": ("chat", {"messages": HI, "stream": True}),
        "/v1/responses": ("responses", {"input": "hi", "stream": True}),
        "/v1/messages": ("messages", {"messages": HI, "max_tokens": 50, "stream": True}),
        "/api/chat": ("ollama", {"messages": HI}),
    }
    ends = {
        "/v1/chat/completions": (b'"code":"stream_aborted"', b"[DONE]"),
        "/v1/responses": (b"event: error", b"response.completed"),
        "/v1/messages": (b"event: error", b"message_stop"),
        "/api/chat": (b'{"error":"the stream from alpha/a-unf-ollama broke', b'"done":true'),
    }
    for path, (name, body) in asks.items():
        fakes.alpha.set_fault(Fault.unfinished(after_chunks=3), model=f"a-unf-{name}", times=1)
        with gateway.http.stream("POST", path, json={"model": f"e2e/unf-{name}", **body}) as response:
            assert (path, response.status_code) == (path, 200)
            assert response.headers["x-interlock-resolved"] == f"alpha/a-unf-{name}"
            data = response.read()
        error, success = ends[path]
        assert b"Hello" in data or b"hello" in data.lower(), (path, data)
        assert error in data, (path, data)
        assert success not in data, (path, data)


def test_a_malformed_event_before_any_content_falls_back(gateway: Served, fakes: Fakes) -> None:
    """The role chunk, then an event that is not JSON: nothing reached the caller, so the walk goes on
    (issue 40 item 5) and the caller reads the fallback's answer only."""
    fakes.alpha.set_fault(Fault.malformed(after_chunks=1), model="a-mal-pre")
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    chunks = list(sdk.chat.completions.create(model="e2e/mal-pre", messages=HI, stream=True))  # type: ignore[arg-type]
    assert {c.model for c in chunks} == {"bravo/b-mal-pre"}
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "Hello from bravo, model b-mal-pre."
    )
    assert gateway.health()["candidates"]["alpha/a-mal-pre"]["last_error_class"] == "malformed"


def test_a_malformed_event_after_content_ends_the_stream_with_the_error_event(
    gateway: Served, fakes: Fakes
) -> None:
    """After content a skipped event could be a word or a tool call's arguments: the stream ends with
    the error event, never [DONE], and the failure counts."""
    fakes.alpha.set_fault(Fault.malformed(after_chunks=3), model="a-mal-post")
    before = gateway.metric("interlock_stream_aborted_total", reason="malformed")
    body = {"model": "e2e/mal-post", "messages": HI, "stream": True}
    with gateway.http.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        events = [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]
    assert "[DONE]" not in events
    assert orjson.loads(events[-1])["error"]["code"] == "stream_aborted"
    assert "(malformed)" in orjson.loads(events[-1])["error"]["message"]
    assert gateway.metric("interlock_stream_aborted_total", reason="malformed") == before + 1
