"""The Anthropic Messages surface through a real `interlock serve`, driven by the real `anthropic` SDK.

The alias `e2e/an-local` walks a dead Ollama worker first, then a live one: every request here is an
Anthropic-surface request answered by an Ollama worker after a fallback.
"""

from __future__ import annotations

import base64

import anthropic
import pytest

from interlock.testing.faults import Fault
from tests.e2e.conftest import Fakes
from tests.e2e.harness import Served

HI: list[anthropic.types.MessageParam] = [{"role": "user", "content": "hi"}]
PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
WEATHER: anthropic.types.ToolParam = {
    "name": "get_weather",
    "description": "the weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def client(gateway: Served) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.url, api_key="caller-key", max_retries=0)


def last_sent(fakes: Fakes, model: str = "llama3.2:3b") -> dict[str, object]:
    bodies = [r.body for r in fakes.box.requests if isinstance(r.body, dict) and r.body.get("model") == model]
    return bodies[-1]


def test_a_plain_message_falls_back_to_the_worker(gateway: Served, fakes: Fakes) -> None:
    raw = client(gateway).messages.with_raw_response.create(
        model="e2e/an-local", max_tokens=64, system="be brief", messages=HI, stop_sequences=["END"]
    )
    message = raw.parse()
    assert raw.headers["x-interlock-resolved"] == "box/llama3.2:3b"
    assert message.model == "e2e/an-local"
    assert message.content[0].type == "text"
    assert message.content[0].text == "Hello from box, model llama3.2:3b."
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 0
    sent = last_sent(fakes)
    assert sent["messages"][0] == {"role": "system", "content": "be brief"}  # type: ignore[index]
    options = sent["options"]
    assert isinstance(options, dict)
    assert (options["num_predict"], options["stop"]) == (64, ["END"])


def test_streaming_follows_anthropic_s_event_sequence(gateway: Served) -> None:
    with client(gateway).messages.stream(model="e2e/an-local", max_tokens=64, messages=HI) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    assert "content_block_start" in kinds
    assert "content_block_stop" in kinds
    assert final.content[0].type == "text"
    assert final.content[0].text == "Hello from box, model llama3.2:3b."
    assert final.stop_reason == "end_turn"


def test_tools_and_a_tool_result(gateway: Served, fakes: Fakes) -> None:
    sdk = client(gateway)
    first = sdk.messages.create(model="e2e/an-local", max_tokens=64, messages=HI, tools=[WEATHER])
    assert first.stop_reason == "tool_use"
    use = next(block for block in first.content if block.type == "tool_use")
    assert use.name == "get_weather"
    assert "city" in use.input  # type: ignore[operator]
    history: list[anthropic.types.MessageParam] = [
        *HI,
        {"role": "assistant", "content": first.content},  # type: ignore[typeddict-item]
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]},
    ]
    second = sdk.messages.create(model="e2e/an-local", max_tokens=64, messages=history, tools=[WEATHER])
    assert second.stop_reason == "end_turn"
    sent = last_sent(fakes)["messages"]
    assert sent[-1] == {"role": "tool", "content": "sunny", "tool_name": "get_weather"}  # type: ignore[index]
    with sdk.messages.stream(model="e2e/an-local", max_tokens=64, messages=HI, tools=[WEATHER]) as stream:
        streamed = stream.get_final_message()
    assert [b.type for b in streamed.content] == ["tool_use"]
    assert streamed.content[0].input == use.input  # type: ignore[union-attr]


def test_an_image_reaches_the_worker(gateway: Served, fakes: Fakes) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}}
    content = [{"type": "text", "text": "what is this?"}, image]
    message = client(gateway).messages.create(
        model="e2e/an-vision",
        max_tokens=64,
        messages=[{"role": "user", "content": content}],  # type: ignore[list-item]
    )
    assert message.content[0].type == "text"
    sent = last_sent(fakes, "gemma3:12b")["messages"]
    assert sent[-1] == {"role": "user", "content": "what is this?", "images": [PIXEL]}  # type: ignore[index]


def test_count_tokens_is_the_gateway_s_estimate(gateway: Served) -> None:
    sdk = client(gateway)
    small = sdk.messages.count_tokens(model="e2e/an-local", messages=HI)
    large = sdk.messages.count_tokens(model="e2e/an-local", messages=HI, system="x " * 300, tools=[WEATHER])
    assert 0 < small.input_tokens < large.input_tokens


def test_errors_are_in_anthropic_s_shape(gateway: Served) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        client(gateway).messages.create(model="e2e/nope", max_tokens=8, messages=HI)
    assert caught.value.body["type"] == "error"  # type: ignore[index]
    assert caught.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    answer = gateway.http.post("/v1/messages", json={"model": "e2e/an-local", "messages": HI})
    assert answer.status_code == 400
    assert answer.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "`max_tokens` is required: a positive integer"},
    }


def test_a_cut_stream_ends_with_an_error_event_and_no_message_stop(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.set_fault(Fault.cut_stream(after_chunks=2), model="a-an-cut")
    body = {"model": "e2e/an-cut", "max_tokens": 64, "messages": HI, "stream": True}
    with gateway.http.stream("POST", "/v1/messages", json=body) as response:
        assert response.status_code == 200
        events = [line[len("event: ") :] for line in response.iter_lines() if line.startswith("event: ")]
    assert events[0] == "message_start"
    assert events[-1] == "error"
    assert "message_stop" not in events
    assert "message_delta" not in events


def test_the_sdk_sees_a_cut_stream_as_an_error(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.set_fault(Fault.cut_stream(after_chunks=2), model="a-an-cut2")
    stream = client(gateway).messages.create(model="e2e/an-cut2", max_tokens=64, messages=HI, stream=True)
    with pytest.raises(anthropic.APIStatusError, match="broke after it had started"):
        list(stream)
