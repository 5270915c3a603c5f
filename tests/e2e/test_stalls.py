"""Streams that fall silent, through a real `interlock serve`: a stall after the first content ends at the
provider's `idle` timeout with the surface's error event and counts against the circuit; a silence before
it (a long prefill, a walk) starts the answer after `server.stream_keepalive` and keeps it alive in the
caller's format, the walk unseen. Intervals are short by configuration (1 s keepalive, 2.5 s silences:
issue 38's 10 s and 25 s, scaled), never asserted as times."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import ollama
import openai
import orjson
import pytest

from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.e2e.harness import Served, compile_to

CONFIG = """\
version: 1
server: {{alias_namespace: st/, direct_models: allow, stream_keepalive: 1s}}
providers:
  stally:
    kind: openai
    base_url: "{stally}/v1"
    probe: false
    timeouts: {{connect: 1s, first_byte: 5s, idle: 500ms, total: 60s}}
  rescue:
    kind: openai
    base_url: "{rescue}/v1"
    probe: false
    timeouts: {{connect: 1s, first_byte: 5s, total: 60s}}
  mute:  # answers nothing: the first-byte deadline ends each call after 2.5 s of silence
    kind: openai
    base_url: "{stally}/v1"
    probe: false
    timeouts: {{connect: 1s, first_byte: 2500ms, total: 60s}}
health: {{failure_threshold: 2, open_for: 60s}}
aliases:
  st/idle: {{chain: [stally/s-idle, rescue/r-idle]}}
  st/idle-messages: {{chain: [stally/s-idle-messages, rescue/r-idle-messages]}}
  st/prefill: {{chain: [stally/s-prefill, rescue/r-prefill]}}
  st/prefill-sdk: {{chain: [stally/s-prefill-sdk, rescue/r-prefill-sdk]}}
  st/prefill-messages: {{chain: [stally/s-prefill-messages, rescue/r-prefill-messages]}}
  st/prefill-ollama: {{chain: [stally/s-prefill-ollama, rescue/r-prefill-ollama]}}
  st/prefill-plain: {{chain: [stally/s-prefill-plain, rescue/r-prefill-plain]}}
  st/dies: {{chain: [mute/m-dies, rescue/r-dies]}}
  st/all-die: {{chain: [mute/m-all1, mute/m-all2]}}
  st/resume: {{chain: [stally/same, rescue/same], resume: same_model}}
  st/resume-other: {{chain: [stally/one-model, rescue/another-model], resume: same_model}}
"""

HI = [{"role": "user", "content": "one two three four five"}]


@dataclass
class Rig:
    gateway: Served
    stally: FakeOpenAI
    rescue: FakeOpenAI


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    folder: Path = tmp_path_factory.mktemp("stalls")
    with FakeOpenAI(name="stally") as stally, FakeOpenAI(name="rescue") as rescue:
        text = CONFIG.format(stally=stally.url, rescue=rescue.url)
        plan = compile_to(folder / "config.yaml", text, folder / "plan.json")
        gateway = Served(plan, {}, folder / "gateway.log")
        try:
            yield Rig(gateway, stally, rescue)
        finally:
            gateway.stop()


def test_a_stream_that_stalls_after_its_first_content_ends_at_idle_with_the_error_event(rig: Rig) -> None:
    gateway = rig.gateway
    rig.stally.set_fault(Fault.stall(after_chunks=2), model="s-idle")  # silent until the gateway gives up
    before = gateway.metric("interlock_stream_aborted_total", reason="idle_timeout")
    body = {"model": "st/idle", "messages": HI, "stream": True}
    with gateway.http.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        events = [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]
    assert "[DONE]" not in events  # never the success terminator
    assert [orjson.loads(e)["model"] for e in events[:2]] == ["stally/s-idle", "stally/s-idle"]
    assert orjson.loads(events[-1]) == {
        "error": {
            "message": "the stream from stally/s-idle broke after it had started (idle_timeout); "
            "the answer is incomplete",
            "type": "server_error",
            "param": None,
            "code": "stream_aborted",
        }
    }
    assert gateway.metric("interlock_stream_aborted_total", reason="idle_timeout") == before + 1
    health = gateway.health()
    assert health["candidates"]["stally/s-idle"]["consecutive_failures"] == 1  # towards the circuit
    assert health["candidates"]["stally/s-idle"]["last_error_class"] == "idle_timeout"
    assert health["providers"]["stally"]["timeouts"] == {
        "connect_s": 1.0,
        "first_byte_s": 5.0,
        "idle_s": 0.5,
        "total_s": 60.0,
    }
    assert health["providers"]["rescue"]["timeouts"]["idle_s"] == 120.0  # unset: the kind's own


def test_a_stalled_messages_stream_ends_with_its_error_event_not_message_stop(rig: Rig) -> None:
    rig.stally.set_fault(Fault.stall(after_chunks=2), model="s-idle-messages")
    body = {"model": "st/idle-messages", "max_tokens": 64, "messages": HI, "stream": True}
    with rig.gateway.http.stream("POST", "/v1/messages", json=body) as response:
        assert response.status_code == 200
        kinds = [line[len("event: ") :] for line in response.iter_lines() if line.startswith("event: ")]
    assert kinds[0] == "message_start"
    assert kinds[-1] == "error"
    assert "message_stop" not in kinds


# -- a silent prefill: the head and keepalives, the walk unseen (issue 38 item 4) --------------------

SILENCE_S = 2.5  # issue 38's 25 s, scaled to the 1 s keepalive as 25 s is to 10 s
TEXT = "Hello from stally, model s-prefill."


def lines_of(gateway: Served, path: str, body: dict[str, object]) -> tuple[int, dict[str, str], list[str]]:
    """Status, headers and every line of a streamed answer, blank lines left out."""
    with gateway.http.stream("POST", path, json=body) as response:
        return response.status_code, dict(response.headers), [x for x in response.iter_lines() if x]


def test_a_silent_prefill_starts_the_stream_with_keepalives_then_the_whole_answer(rig: Rig) -> None:
    rig.stally.set_fault(Fault.slow_first_byte(SILENCE_S), model="s-prefill")  # no byte for 2.5 s
    body = {"model": "st/prefill", "messages": HI, "stream": True}
    status, headers, lines = lines_of(rig.gateway, "/v1/chat/completions", body)
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert "x-interlock-resolved" not in headers  # the head went out before anyone had answered
    first_data = next(i for i, line in enumerate(lines) if line.startswith("data: "))
    assert first_data >= 1
    assert set(lines[:first_data]) == {": keepalive"}  # bytes before the answer: only keepalives
    data = [line[len("data: ") :] for line in lines[first_data:]]
    assert data[-1] == "[DONE]"
    chunks = [orjson.loads(d) for d in data[:-1]]
    assert {c["model"] for c in chunks} == {"stally/s-prefill"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == TEXT


def test_the_openai_sdk_reads_past_the_keepalives(rig: Rig) -> None:
    rig.stally.set_fault(Fault.slow_first_byte(SILENCE_S), model="s-prefill-sdk")
    sdk = openai.OpenAI(base_url=f"{rig.gateway.url}/v1", api_key="x", max_retries=0)
    stream = sdk.chat.completions.create(model="st/prefill-sdk", messages=HI, stream=True)  # type: ignore[arg-type]
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from stally, model s-prefill-sdk."


def test_a_candidate_that_dies_silently_after_the_head_went_out_falls_back_unseen(rig: Rig) -> None:
    """The primary says nothing and its first-byte deadline ends it after 2.5 s (the head and
    keepalives went out meanwhile): the stream carries the fallback's answer, and no error."""
    rig.stally.set_fault(Fault.hang(), model="m-dies")
    body = {"model": "st/dies", "messages": HI, "stream": True}
    status, _, lines = lines_of(rig.gateway, "/v1/chat/completions", body)
    assert status == 200
    assert lines[0] == ": keepalive"
    data = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    chunks = [orjson.loads(d) for d in data[:-1]]
    assert all("error" not in c for c in chunks)
    assert {c["model"] for c in chunks} == {"rescue/r-dies"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello from rescue, model r-dies."
    assert [r.body["model"] for r in rig.stally.requests if r.body and r.body.get("model") == "m-dies"]


def test_a_walk_that_fails_whole_after_the_head_went_out_ends_with_the_error_event(rig: Rig) -> None:
    for model in ("m-all1", "m-all2"):
        rig.stally.set_fault(Fault.hang(), model=model)
    body = {"model": "st/all-die", "messages": HI, "stream": True}
    status, _, lines = lines_of(rig.gateway, "/v1/chat/completions", body)
    assert status == 200  # the head was out before the walk ended
    assert lines[0] == ": keepalive"
    data = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    assert "[DONE]" not in data
    (error,) = (orjson.loads(d)["error"] for d in data)
    assert error["type"] == "server_error"
    assert "st/all-die" in error["message"]
    assert "first_byte_timeout" in error["message"]


def test_a_silent_prefill_on_messages_sends_ping_events_the_sdk_reads_past(rig: Rig) -> None:
    rig.stally.set_fault(Fault.slow_first_byte(SILENCE_S), model="s-prefill-messages")
    body = {"model": "st/prefill-messages", "max_tokens": 64, "messages": HI, "stream": True}
    status, _, lines = lines_of(rig.gateway, "/v1/messages", body)
    assert status == 200
    events = [line[len("event: ") :] for line in lines if line.startswith("event: ")]
    start = events.index("message_start")
    assert start >= 1
    assert set(events[:start]) == {"ping"}
    assert events[-1] == "message_stop"
    rig.stally.set_fault(Fault.slow_first_byte(SILENCE_S), model="s-prefill-messages")
    sdk = anthropic.Anthropic(base_url=rig.gateway.url, api_key="x", max_retries=0)
    with sdk.messages.stream(model="st/prefill-messages", max_tokens=64, messages=HI) as stream:  # type: ignore[arg-type]
        text = "".join(stream.text_stream)
    assert text == "Hello from stally, model s-prefill-messages."


def test_a_silent_prefill_on_ollama_sends_empty_lines_the_client_reads_past(rig: Rig) -> None:
    """NDJSON has no comment: the keepalive is a line of the answer with no content, `done: false`."""
    rig.stally.set_fault(Fault.slow_first_byte(SILENCE_S), model="s-prefill-ollama")
    body = {"model": "st/prefill-ollama", "messages": HI, "stream": True}
    status, headers, lines = lines_of(rig.gateway, "/api/chat", body)
    assert status == 200
    assert headers["content-type"].startswith("application/x-ndjson")
    parsed = [orjson.loads(line) for line in lines]
    assert parsed[0]["message"] == {"role": "assistant", "content": ""}
    assert parsed[0]["done"] is False
    assert parsed[-1]["done"] is True
    rig.stally.set_fault(Fault.slow_first_byte(SILENCE_S), model="s-prefill-ollama")
    client = ollama.Client(host=rig.gateway.url)
    parts = client.chat(model="st/prefill-ollama", messages=HI, stream=True)
    assert "".join(p.message.content or "" for p in parts) == "Hello from stally, model s-prefill-ollama."


def test_a_non_streamed_request_is_unchanged_by_a_silent_prefill(rig: Rig) -> None:
    """No keepalive without a stream: the answer, and its head, come when the upstream answers."""
    rig.stally.set_fault(Fault.slow_first_byte(SILENCE_S), model="s-prefill-plain")
    response = rig.gateway.http.post(
        "/v1/chat/completions", json={"model": "st/prefill-plain", "messages": HI}
    )
    assert response.status_code == 200
    assert response.headers["x-interlock-resolved"] == "stally/s-prefill-plain"
    assert response.json()["choices"][0]["message"]["content"] == "Hello from stally, model s-prefill-plain."


# -- resume: same_model (issue 40 item 7; the real llama-server's proof is tests/inference) ------------


def test_a_cut_stream_goes_on_from_a_replica_of_its_model_with_the_answer_so_far_as_prefill(rig: Rig) -> None:
    rig.stally.set_fault(Fault.cut_stream(after_chunks=4), model="same")  # the role chunk, then 3 words
    rig.rescue.clear_requests()
    before = rig.gateway.metric("interlock_stream_resumed_total", candidate="rescue/same")
    body = {"model": "st/resume", "messages": HI, "stream": True}
    status, _, lines = lines_of(rig.gateway, "/v1/chat/completions", body)
    assert status == 200
    data = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    chunks = [orjson.loads(d) for d in data[:-1]]
    assert all("error" not in c for c in chunks)
    finishes = [
        c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]
    ]
    assert finishes == ["stop"]  # one answer, one end
    roles = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("role")]
    assert len(roles) == 1  # the replica's preamble is not a second start
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    (asked,) = [r.body for r in rig.rescue.requests if r.body and r.body.get("model") == "same"]
    prefill = asked["messages"][-1]
    assert prefill["role"] == "assistant"
    assert text.startswith(prefill["content"])  # what was said, then the replica's continuation
    assert prefill["content"]
    assert text != prefill["content"]
    assert rig.gateway.metric("interlock_stream_resumed_total", candidate="rescue/same") == before + 1


def test_a_cut_stream_is_never_resumed_on_another_model(rig: Rig) -> None:
    rig.stally.set_fault(Fault.cut_stream(after_chunks=4), model="one-model")
    body = {"model": "st/resume-other", "messages": HI, "stream": True}
    status, _, lines = lines_of(rig.gateway, "/v1/chat/completions", body)
    assert status == 200
    data = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    assert "[DONE]" not in data
    assert orjson.loads(data[-1])["error"]["code"] == "stream_aborted"
    assert not [r for r in rig.rescue.requests if r.body and r.body.get("model") == "another-model"]
