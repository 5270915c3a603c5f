"""The OpenAI Responses surface through a real `interlock serve`, driven by the real `openai` SDK.

`e2e/rs-cloud` walks a dead Ollama worker first, then an OpenAI-compatible upstream.
"""

from __future__ import annotations

import openai
import pytest

from interlock.testing.faults import Fault
from tests.e2e.conftest import Fakes
from tests.e2e.harness import Served

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def client(gateway: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="caller-key", max_retries=0)


def last_sent(fakes: Fakes, model: str = "a-rs") -> dict[str, object]:
    bodies = [
        r.body for r in fakes.alpha.requests if isinstance(r.body, dict) and r.body.get("model") == model
    ]
    return bodies[-1]


def test_plain_text_input_with_instructions_falls_back_to_the_cloud(gateway: Served, fakes: Fakes) -> None:
    raw = client(gateway).responses.with_raw_response.create(
        model="e2e/rs-cloud", input="hi", instructions="be brief", max_output_tokens=32
    )
    response = raw.parse()
    assert raw.headers["x-interlock-resolved"] == "alpha/a-rs"
    assert response.status == "completed"
    assert response.model == "e2e/rs-cloud"
    assert response.output_text == "Hello from alpha, model a-rs."
    assert response.usage is not None
    assert response.usage.output_tokens > 0
    sent = last_sent(fakes)
    assert sent["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert sent["max_tokens"] == 32


def test_streaming_sends_typed_events_ending_with_completed(gateway: Served) -> None:
    events = list(client(gateway).responses.create(model="e2e/rs-cloud", input="hi", stream=True))
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "Hello from alpha, model a-rs."
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.output_text == deltas  # type: ignore[union-attr]


def test_function_tools_and_their_outputs(gateway: Served, fakes: Fakes) -> None:
    sdk = client(gateway)
    first = sdk.responses.create(model="e2e/rs-cloud", input="weather?", tools=[WEATHER])  # type: ignore[list-item]
    calls = [item for item in first.output if item.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather"]
    follow_up = [
        {"role": "user", "content": "weather?"},
        *[c.model_dump(exclude_none=True) for c in calls],
        {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny"},
    ]
    second = sdk.responses.create(model="e2e/rs-cloud", input=follow_up, tools=[WEATHER])  # type: ignore[arg-type,list-item]
    assert second.status == "completed"
    sent = last_sent(fakes)["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": calls[0].call_id, "content": "sunny"}  # type: ignore[index]
    assert sent[-2]["tool_calls"][0]["function"]["name"] == "get_weather"  # type: ignore[index]
    streamed = list(
        sdk.responses.create(model="e2e/rs-cloud", input="weather?", tools=[WEATHER], stream=True)
    )  # type: ignore[list-item]
    done = [e for e in streamed if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1
    assert done[0].arguments == calls[0].arguments


def test_previous_response_id_is_a_clear_400(gateway: Served) -> None:
    with pytest.raises(openai.BadRequestError, match="stateless and stores no responses") as caught:
        client(gateway).responses.create(model="e2e/rs-cloud", input="hi", previous_response_id="resp_1")
    assert caught.value.param == "previous_response_id"


def test_a_cut_stream_ends_with_an_error_event_and_no_completed(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.set_fault(Fault.cut_stream(after_chunks=2), model="a-rs-cut")
    events = list(client(gateway).responses.create(model="e2e/rs-cut", input="hi", stream=True))
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created"
    assert kinds[-1] == "error"
    assert "response.completed" not in kinds
    assert "broke after it had started" in events[-1].message  # type: ignore[union-attr]
