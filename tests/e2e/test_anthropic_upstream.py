"""The `anthropic` provider kind against the fake Anthropic upstream, through a real `interlock serve`."""

from __future__ import annotations

import ollama
import openai
import pytest

from interlock.testing.faults import Fault
from tests.e2e.conftest import CLAUDE_KEY, Fakes
from tests.e2e.harness import Served

HI = [{"role": "user", "content": "hi"}]


def sent(fakes: Fakes, model: str) -> list[dict[str, object]]:
    return [
        r.body for r in fakes.claude.requests if isinstance(r.body, dict) and r.body.get("model") == model
    ]


def test_an_ollama_surface_request_falls_back_to_anthropic(gateway: Served, fakes: Fakes) -> None:
    sdk = ollama.Client(host=gateway.url)
    answer = sdk.chat(
        model="e2e/to-claude",
        messages=[{"role": "system", "content": "be brief"}, *HI],
        options={"num_predict": 50, "temperature": 0.5, "top_k": 20},
        stream=False,
    )
    assert answer.message.content == "Hello from claude, model claude-fake."
    assert answer.eval_count is not None
    body = sent(fakes, "claude-fake")[-1]
    assert body["system"] == "be brief"
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert (body["max_tokens"], body["temperature"], body["top_k"]) == (50, 0.5, 20)
    request = next(r for r in reversed(fakes.claude.requests) if r.path == "/v1/messages")
    assert request.headers["x-api-key"] == CLAUDE_KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    parts = list(sdk.chat(model="e2e/to-claude", messages=HI, stream=True))
    assert "".join(p.message.content or "" for p in parts) == "Hello from claude, model claude-fake."
    assert parts[-1].done


def test_tools_cross_to_anthropic_and_back(gateway: Served, fakes: Fakes) -> None:
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    first = sdk.chat.completions.create(model="e2e/to-claude", messages=HI, tools=tools)  # type: ignore[arg-type]
    calls = first.choices[0].message.tool_calls or []
    assert first.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in calls] == ["get_weather"]  # type: ignore[union-attr]
    history = [
        *HI,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": calls[0].id, "content": "sunny"},
    ]
    second = sdk.chat.completions.create(model="e2e/to-claude", messages=history, tools=tools)  # type: ignore[arg-type]
    assert second.choices[0].message.content == "Hello from claude, model claude-fake."
    last = sent(fakes, "claude-fake")[-1]["messages"][-1]  # type: ignore[index]
    assert last == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": calls[0].id, "content": "sunny"}],
    }
    stream = sdk.chat.completions.create(model="e2e/to-claude", messages=HI, tools=tools, stream=True)  # type: ignore[arg-type]
    arguments = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""  # type: ignore[index,union-attr]
        for c in stream
        if c.choices and c.choices[0].delta.tool_calls
    )
    assert arguments == '{"city":"Paris"}'


def test_529_overloaded_is_transient_and_falls_back(gateway: Served, fakes: Fakes) -> None:
    fakes.claude.set_fault(Fault.http_status(529, "Overloaded"), model="c-529")
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    raw = sdk.chat.completions.with_raw_response.create(model="e2e/overloaded", messages=HI)  # type: ignore[arg-type]
    assert raw.headers["x-interlock-resolved"] == "bravo/b-after-529"
    assert (
        gateway.metric(
            "interlock_upstream_errors_total", candidate="claude/c-529", error_class="server_error"
        )
        == 1
    )


def test_an_anthropic_stream_cut_mid_way_is_an_aborted_stream(gateway: Served, fakes: Fakes) -> None:
    fakes.claude.set_fault(Fault.cut_stream(after_chunks=3), model="c-cut")
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    stream = sdk.chat.completions.create(model="e2e/claude-cut", messages=HI, stream=True)  # type: ignore[arg-type]
    with pytest.raises(openai.APIError, match="the stream from claude/c-cut broke after it had started"):
        list(stream)
