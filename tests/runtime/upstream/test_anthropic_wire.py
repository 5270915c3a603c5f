"""OpenAI <-> Anthropic Messages translation, without a network."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from interlock.runtime.base.errors import CannotServe, ProtocolFailure, ServerError
from interlock.runtime.wire import anthropic as anthropic_wire
from tests.runtime.upstream.helpers import endpoint

PIXEL = "iVBORw0KGgo="


def test_a_rich_request_crosses_with_nothing_lost() -> None:
    body: dict[str, Any] = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
            {"role": "user", "content": "and now?"},
        ],
        "stop": "END",
        "options": {"num_predict": 9, "top_k": 3},
        "temperature": 0.2,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": "required",
        "parallel_tool_calls": False,
    }
    assert anthropic_wire.messages_request(body, "claude-x", stream=True) == {
        "model": "claude-x",
        "system": "be brief",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "done"},
                    {"type": "text", "text": "and now?"},
                ],
            },
        ],
        "max_tokens": 9,
        "stop_sequences": ["END"],
        "temperature": 0.2,
        "top_k": 3,
        "tools": [{"name": "f", "description": "", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "stream": True,
    }


def test_what_anthropic_cannot_do_is_a_refusal() -> None:
    assert anthropic_wire.refusal("chat", {"messages": []}) is None
    refused = anthropic_wire.refusal("embeddings", {"input": "x"})
    assert refused is not None
    assert refused.reason == "unsupported_input"
    assert anthropic_wire.refusal("chat", {"n": 2}) is not None
    bad = {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]}
    with pytest.raises(CannotServe, match="not JSON"):
        anthropic_wire.messages_request(bad, "m", stream=False)


def _feed(decoder: anthropic_wire.EventDecoder, *lines: bytes) -> deque[dict[str, Any]]:
    out: deque[dict[str, Any]] = deque()
    for line in lines:
        decoder.feed(line, out)
    return out


def test_an_overloaded_error_event_is_transient_and_a_body_without_message_stop_is_cut() -> None:
    decoder = anthropic_wire.EventDecoder("m", endpoint("anthropic", "http://x"), include_usage=True)
    _feed(decoder, b'data: {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}', b"")
    with pytest.raises(ServerError) as info:
        _feed(
            decoder, b'data: {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}', b""
        )
    assert info.value.status == 529
    cut = anthropic_wire.EventDecoder("m", endpoint("anthropic", "http://x"), include_usage=False)
    _feed(cut, b'data: {"type": "message_start", "message": {}}', b"")
    with pytest.raises(ProtocolFailure, match="before message_stop"):
        cut.end(deque())


def test_an_event_of_endless_data_lines_is_held_to_the_line_limit() -> None:
    ep = endpoint("anthropic", "http://127.0.0.1:9", max_line_bytes=1000)
    decoder = anthropic_wire.EventDecoder("m", ep, include_usage=False)
    out: deque[dict[str, Any]] = deque()
    for _ in range(90):  # each line is short (11 bytes of data), and the event does not end
        decoder.feed(b"data: " + b"x" * 10, out)
    with pytest.raises(ProtocolFailure, match=r"^stream event is over the 1000-byte limit$"):
        decoder.feed(b"data: " + b"x" * 10, out)
    decoder = anthropic_wire.EventDecoder("m", ep, include_usage=False)
    for _ in range(200):  # the same amount, as events that do end: fine
        decoder.feed(b'data: {"type": "ping"}', out)
        decoder.feed(b"", out)
    assert len(out) == 0  # pings carry nothing, and nothing was refused


@pytest.mark.parametrize(
    ("extra", "thinking"),
    [
        ({"think": True}, {"type": "enabled", "budget_tokens": 4096}),
        ({"reasoning_effort": "high"}, {"type": "enabled", "budget_tokens": 16384}),
        ({"think": "low"}, {"type": "enabled", "budget_tokens": 1024}),
        ({"think": False}, {"type": "disabled"}),
        ({"reasoning_effort": "none"}, {"type": "disabled"}),
        ({"reasoning_effort": "high", "max_tokens": 2000}, {"type": "enabled", "budget_tokens": 1999}),
        ({"think": True, "max_tokens": 1000}, None),  # no budget of at least 1024 fits under 1000
        ({}, None),
    ],
)
def test_think_and_reasoning_effort_become_a_thinking_budget(
    extra: dict[str, Any], thinking: dict[str, Any] | None
) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 32000, **extra}
    assert anthropic_wire.messages_request(body, "claude-x", stream=False).get("thinking") == thinking


def test_cache_usage_counts_in_the_prompt_and_as_cached_tokens() -> None:
    answer = {
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 12,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 2048,
            "output_tokens": 3,
        },
    }
    usage = anthropic_wire.chat_completion(answer, "claude-x")["usage"]
    assert usage == {
        "prompt_tokens": 2160,
        "completion_tokens": 3,
        "total_tokens": 2163,
        "prompt_tokens_details": {"cached_tokens": 2048},
    }
