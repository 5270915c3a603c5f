"""Nothing a client sends is lost silently on the way to another format (issue 38, item 8): each field
of a Messages or Responses request is translated into the internal form or named in what
``X-Interlock-Dropped`` says (the ``dropped`` list the surface's translation returns)."""

from __future__ import annotations

from typing import Any

from interlock.runtime.wire import openai_responses
from interlock.runtime.wire.anthropic_caller import internal_request

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def _messages(**changes: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], **changes}


def _tool_names(internal: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in internal.get("tools") or ()]


def test_a_deferred_tool_stays_out_of_the_prompt_until_a_tool_reference_loads_it() -> None:
    """As Anthropic keeps a ``defer_loading`` tool out of the model's prompt until tool search returns a
    ``tool_reference`` to it (Claude Code 2.1.337 sends ``DeferredToolPlaceholder`` so)."""
    tools = [
        {"name": "ToolSearch", "description": "find tools", "input_schema": SCHEMA},
        {"name": "WebFetch", "description": "fetch", "input_schema": SCHEMA, "defer_loading": True},
    ]
    internal, dropped, _ = internal_request(_messages(tools=tools))
    assert _tool_names(internal) == ["ToolSearch"]
    assert dropped == []  # its meaning kept, not lost: nothing to name
    turns = [
        {"role": "user", "content": "fetch it"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {"q": "fetch"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "tool_reference", "tool_name": "WebFetch"}],
                }
            ],
        },
    ]
    internal, dropped, _ = internal_request(_messages(tools=tools, messages=turns))
    assert _tool_names(internal) == ["ToolSearch", "WebFetch"]
    assert dropped == []


def test_a_tool_s_strict_goes_on_and_its_other_keys_are_named() -> None:
    tool = {"name": "f", "input_schema": SCHEMA, "strict": True, "input_examples": [{"q": "x"}]}
    internal, dropped, _ = internal_request(_messages(tools=[tool]))
    assert internal["tools"][0]["function"]["strict"] is True
    assert dropped == ["tools.input_examples"]


def test_thinking_s_type_is_translated_and_its_other_keys_named() -> None:
    internal, dropped, _ = internal_request(_messages(thinking={"type": "adaptive", "display": "omitted"}))
    assert "think" not in internal  # adaptive: the model decides
    assert dropped == ["thinking.display"]
    internal, dropped, _ = internal_request(_messages(thinking={"type": "enabled", "budget_tokens": 2048}))
    assert internal["think"] is True
    assert dropped == ["thinking.budget_tokens"]


def test_tool_choice_s_disable_parallel_tool_use_is_parallel_tool_calls_false() -> None:
    tools = [{"name": "f", "input_schema": SCHEMA}]
    choice = {"type": "auto", "disable_parallel_tool_use": True}
    internal, dropped, _ = internal_request(_messages(tools=tools, tool_choice=choice))
    assert internal["tool_choice"] == "auto"
    assert internal["parallel_tool_calls"] is False
    assert dropped == []


def test_what_a_content_block_carries_beyond_the_internal_form_is_named() -> None:
    citation = {"type": "char_location", "cited_text": "x", "document_index": 0}
    turns = [
        {"role": "user", "content": "look"},
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3"},
                {"type": "text", "text": "seen", "citations": [citation]},
                {"type": "tool_use", "id": "t1", "name": "shot", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [
                        {"type": "text", "text": "a screenshot"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                        },
                    ],
                }
            ],
        },
    ]
    internal, dropped, _ = internal_request(_messages(messages=turns))
    assert dropped == ["redacted_thinking", "text.citations", "tool_result.image"]
    assert internal["messages"][2] == {"role": "tool", "tool_call_id": "t1", "content": "a screenshot"}


def _responses(**changes: Any) -> dict[str, Any]:
    return {"model": "m", "input": "hi", **changes}


def test_a_reasoning_item_s_summary_goes_back_with_the_turn_it_preceded() -> None:
    """What this gateway's own answer put in a reasoning item's summary comes back as that turn's
    ``reasoning_content`` (the field llama-server reads back), not lost; encrypted content is named."""
    summary = [{"type": "summary_text", "text": "The user greets me."}]
    items = [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": summary, "encrypted_content": None},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAAB-opaque"},
        {"type": "message", "role": "assistant", "content": "Hello."},
    ]
    internal, dropped, _ = openai_responses.internal_request(_responses(input=items))
    assert internal["messages"][1]["reasoning_content"] == "The user greets me."
    assert internal["messages"][1]["tool_calls"][0]["function"]["name"] == "ls"
    assert "reasoning_content" not in internal["messages"][3]
    assert dropped == ["input.reasoning.encrypted_content"]


def test_responses_fields_past_the_internal_form_are_named() -> None:
    tools = [{"type": "function", "name": "f", "parameters": SCHEMA, "defer_loading": True}]
    body = _responses(
        tools=tools,
        reasoning={"effort": "low", "summary": "auto"},
        text={"format": {"type": "text"}, "verbosity": "low"},
    )
    internal, dropped, _ = openai_responses.internal_request(body)
    assert internal["reasoning_effort"] == "low"  # the summary: the answer's reasoning item holds it
    assert dropped == ["tools.defer_loading", "text.verbosity"]


def test_a_system_turn_after_the_last_user_turn_goes_before_it() -> None:
    """Claude Code 2.1.337's first request ends with its environment as a system turn: a chat upstream
    gets it before the user's words, so the conversation ends on them (earlier system turns stay put)."""
    turns = [
        {"role": "user", "content": "first"},
        {"role": "system", "content": "a reminder"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "say hi"}]},
        {"role": "system", "content": [{"type": "text", "text": "# Environment"}]},
    ]
    internal, _, _ = internal_request(_messages(system="You are Claude Code.", messages=turns))
    assert [(m["role"], m["content"]) for m in internal["messages"]] == [
        ("system", "You are Claude Code."),
        ("user", "first"),
        ("system", "a reminder"),
        ("assistant", "ok"),
        ("system", "# Environment"),
        ("user", "say hi"),
    ]
