"""Each surface's answers and stream events parse as its own SDK's types (no network: renderers only).

The end-to-end tests drive the real clients through `interlock serve`; these cover what the fakes
never send (thinking text, every event kind) and check the shapes against the SDKs' pydantic models.
"""

from __future__ import annotations

from typing import Any

import anthropic
import orjson
import pydantic
from openai.types.responses import Response, ResponseStreamEvent

from interlock.runtime.surfaces.anthropic import Messages
from interlock.runtime.surfaces.base import Parsed
from interlock.runtime.surfaces.responses import Responses

RESULT: dict[str, Any] = {
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Let me look.",
                "reasoning": "the user wants weather",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 7, "completion_tokens": 9},
}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


CHUNKS = [
    _chunk({"role": "assistant", "content": ""}),
    _chunk({"reasoning": "the user "}),
    _chunk({"reasoning": "wants weather"}),
    _chunk({"content": "Let me "}),
    _chunk({"content": "look."}),
    _chunk(
        {"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": ""}}]}
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
    _chunk({}, "tool_calls"),
    {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 9}},
]


def _events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in data.decode().split("\n\n"):
        if not block:
            continue
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], orjson.loads(lines["data"])))
    return out


def test_a_responses_answer_with_reasoning_text_and_a_call_is_an_sdk_response() -> None:
    parsed = Parsed("chat", "mana/chat", False, {}, "mana/chat")
    response = Response.model_validate(orjson.loads(Responses().answer(parsed, RESULT, "box/m")))
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output_text == "Let me look."
    assert response.output[0].summary[0].text == "the user wants weather"  # type: ignore[union-attr]


def test_responses_stream_events_are_sdk_events_in_order() -> None:
    render = Responses().stream(Parsed("chat", "m", True, {}, "m"), "box/m")
    data = b"".join(render.chunk(dict(c)) for c in CHUNKS) + render.end()
    adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponseStreamEvent)
    events = [adapter.validate_python(payload) for _, payload in _events(data)]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]
    assert final.output[2].arguments == '{"city":"Oslo"}'
    assert final.usage.output_tokens == 9


def test_anthropic_stream_events_build_the_sdk_s_final_message() -> None:
    render = Messages().stream(Parsed("chat", "m", True, {}, "m"), "box/m")
    data = b"".join(render.chunk(dict(c)) for c in CHUNKS) + render.end()
    events = _events(data)
    assert [name for name, _ in events][:2] == ["message_start", "content_block_start"]
    assert events[-1][0] == "message_stop"
    blocks: dict[int, dict[str, Any]] = {}
    for name, payload in events:
        if name == "content_block_start":
            blocks[payload["index"]] = dict(payload["content_block"])
        elif name == "content_block_delta":
            delta, block = payload["delta"], blocks[payload["index"]]
            key = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial"}[
                delta["type"]
            ]
            block[key] = block.get(key, "") + delta.get(
                "text", delta.get("thinking", delta.get("partial_json", ""))
            )
    tool = blocks[2]
    tool["input"] = orjson.loads(tool.pop("partial"))
    message = anthropic.types.Message.model_validate(
        {**events[0][1]["message"], "content": [blocks[0], blocks[1], tool], "stop_reason": "tool_use"}
    )
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert events[-2][1]["usage"] == {"input_tokens": 7, "output_tokens": 9}


def test_cached_prompt_tokens_reach_anthropic_and_responses_clients_in_their_own_words() -> None:
    usage = {"prompt_tokens": 3000, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 2048}}
    result = {**RESULT, "usage": usage}
    message = orjson.loads(Messages().answer(Parsed("chat", "m", False, {}, "m"), result, "c/m"))
    assert message["usage"] == {"input_tokens": 952, "output_tokens": 5, "cache_read_input_tokens": 2048}
    response = orjson.loads(Responses().answer(Parsed("chat", "m", False, {}, "m"), result, "c/m"))
    assert response["usage"]["input_tokens"] == 3000  # OpenAI counts the cached input in the prompt
    assert response["usage"]["input_tokens_details"]["cached_tokens"] == 2048
