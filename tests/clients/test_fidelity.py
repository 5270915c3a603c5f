"""Same format in and out: what a client sends reaches the upstream as it came, and what the upstream
answers (whole or streamed) comes back field for field, but for the model's name. The answers are real
providers' (tests/fixtures/clients/answers/, from their API references), sent by a fake as they are.

Across formats: what can be carried is translated (Anthropic's cache usage -> ``prompt_tokens`` and
``prompt_tokens_details.cached_tokens``), the rest is named in ``X-Interlock-Dropped``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
import orjson

from interlock.testing.faults import Fault
from tests.clients.conftest import Fakes
from tests.e2e.harness import Served

ANSWERS = Path(__file__).resolve().parents[1] / "fixtures" / "clients" / "answers"
ANTHROPIC_HEADERS = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "prompt-caching-scope-2026-01-05,mid-conversation-system-2026-04-07",
}
CACHED = {"type": "ephemeral"}


def answer(name: str) -> bytes:
    return (ANSWERS / name).read_bytes()


def sse_events(text: str) -> list[Any]:
    return [orjson.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def post(
    gateway: Served, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.Response:
    return gateway.http.post(
        path, content=orjson.dumps(body), headers={"content-type": "application/json", **(headers or {})}
    )


# -- Anthropic -> Anthropic ------------------------------------------------------------------------

CLAUDE_CODE_LIKE: dict[str, Any] = {
    "model": "cl/claude",
    "max_tokens": 1024,
    "system": [
        {"type": "text", "text": "You are Claude Code."},
        {"type": "text", "text": "Project notes.", "cache_control": CACHED},
    ],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "list files", "cache_control": CACHED}]},
        {"role": "system", "content": "Skills are available."},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I will run ls.", "signature": "EqQBCgIYAhIM"},
                {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "ls: denied", "is_error": True}
            ],
        },
    ],
    "tools": [
        {
            "name": "Bash",
            "description": "Run a command",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
            "cache_control": CACHED,
        }
    ],
    "thinking": {"type": "adaptive"},
    "output_config": {"effort": "high"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "metadata": {"user_id": "u-1"},
    "future_request_field": {"x": 1},
}


def test_anthropic_to_anthropic_sends_the_request_as_it_came(gateway: Served, fakes: Fakes) -> None:
    fakes.claude.clear_requests()
    response = post(gateway, "/v1/messages", CLAUDE_CODE_LIKE, ANTHROPIC_HEADERS)
    assert response.status_code == 200, response.text
    assert "x-interlock-dropped" not in response.headers
    (sent,) = fakes.claude.requests
    assert sent.body == {**CLAUDE_CODE_LIKE, "model": "claude-fake"}
    assert sent.headers["anthropic-beta"] == ANTHROPIC_HEADERS["anthropic-beta"]
    assert sent.headers["anthropic-version"] == "2023-06-01"


def test_anthropic_to_anthropic_answers_field_for_field(gateway: Served, fakes: Fakes) -> None:
    recorded = answer("anthropic_message.json")
    fakes.claude.set_fault(Fault.recorded(recorded), model="claude-fake", times=1)
    response = post(gateway, "/v1/messages", CLAUDE_CODE_LIKE, ANTHROPIC_HEADERS)
    assert response.status_code == 200, response.text
    assert response.json() == {**orjson.loads(recorded), "model": "cl/claude"}


def test_anthropic_to_anthropic_streams_every_event_as_it_came(gateway: Served, fakes: Fakes) -> None:
    recorded = answer("anthropic_stream.sse")
    fakes.claude.set_fault(Fault.recorded(recorded, "text/event-stream"), model="claude-fake", times=1)
    response = post(gateway, "/v1/messages", {**CLAUDE_CODE_LIKE, "stream": True}, ANTHROPIC_HEADERS)
    assert response.status_code == 200, response.text
    expected = sse_events(recorded.decode())
    expected[0]["message"]["model"] = "cl/claude"
    assert sse_events(response.text) == expected
    names = [line[7:] for line in response.text.splitlines() if line.startswith("event: ")]
    assert names == [event["type"] for event in expected]  # ping included


# -- Ollama -> Ollama ------------------------------------------------------------------------------

OLLAMA_CHAT: dict[str, Any] = {
    "model": "cl/local",
    "messages": [{"role": "user", "content": "hi"}],
    "options": {"temperature": 0.2, "num_ctx": 8192, "mirostat": 0},
    "keep_alive": "10m",
    "format": "json",
    "future_request_field": True,
}


def test_ollama_to_ollama_sends_the_request_as_it_came(gateway: Served, fakes: Fakes) -> None:
    fakes.box.clear_requests()
    response = post(gateway, "/api/chat", {**OLLAMA_CHAT, "stream": False})
    assert response.status_code == 200, response.text
    (sent,) = [r for r in fakes.box.requests if r.path == "/api/chat"]
    assert sent.body == {**OLLAMA_CHAT, "model": "llama3.2:3b", "stream": False}


def test_ollama_to_ollama_answers_field_for_field(gateway: Served, fakes: Fakes) -> None:
    recorded = answer("ollama_chat.json")
    fakes.box.set_fault(Fault.recorded(recorded), model="llama3.2:3b", times=1)
    response = post(gateway, "/api/chat", {**OLLAMA_CHAT, "stream": False})
    assert response.status_code == 200, response.text
    assert response.json() == {**orjson.loads(recorded), "model": "cl/local"}  # durations, created_at


def test_ollama_to_ollama_streams_every_line_as_it_came(gateway: Served, fakes: Fakes) -> None:
    recorded = answer("ollama_stream.ndjson")
    fakes.box.set_fault(Fault.recorded(recorded, "application/x-ndjson"), model="llama3.2:3b", times=1)
    response = post(gateway, "/api/chat", OLLAMA_CHAT)  # Ollama streams unless told not to
    assert response.status_code == 200, response.text
    expected = [{**orjson.loads(line), "model": "cl/local"} for line in recorded.splitlines()]
    assert [orjson.loads(line) for line in response.text.splitlines()] == expected


# -- OpenAI chat -> openai -------------------------------------------------------------------------

OPENAI_CHAT: dict[str, Any] = {
    "model": "cl/openai",
    "messages": [{"role": "user", "content": "hi"}],
    "temperature": 0.3,
    "future_request_field": {"y": 2},
}


def test_openai_to_openai_sends_the_request_as_it_came(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.clear_requests()
    assert post(gateway, "/v1/chat/completions", OPENAI_CHAT).status_code == 200
    assert post(gateway, "/v1/chat/completions", {**OPENAI_CHAT, "stream": True}).status_code == 200
    whole, streamed = fakes.alpha.requests
    assert whole.body == {**OPENAI_CHAT, "model": "gpt-fake"}
    # metering needs the usage chunk: asked for, and kept from a caller who did not ask
    usage = {"stream_options": {"include_usage": True}}
    assert streamed.body == {**OPENAI_CHAT, "model": "gpt-fake", "stream": True, **usage}


def test_openai_to_openai_answers_field_for_field(gateway: Served, fakes: Fakes) -> None:
    recorded = answer("openai_chat.json")
    fakes.alpha.set_fault(Fault.recorded(recorded), model="gpt-fake", times=1)
    response = post(gateway, "/v1/chat/completions", OPENAI_CHAT)
    assert response.status_code == 200, response.text
    assert response.json() == {**orjson.loads(recorded), "model": "alpha/gpt-fake"}


def test_openai_to_openai_streams_every_chunk_as_it_came(gateway: Served, fakes: Fakes) -> None:
    recorded = answer("openai_stream.sse")
    fakes.alpha.set_fault(Fault.recorded(recorded, "text/event-stream"), model="gpt-fake", times=1)
    body = {**OPENAI_CHAT, "stream": True, "stream_options": {"include_usage": True}}
    response = post(gateway, "/v1/chat/completions", body)
    assert response.status_code == 200, response.text
    expected = [{**chunk, "model": "alpha/gpt-fake"} for chunk in sse_events(recorded.decode())]
    assert sse_events(response.text) == expected
    assert response.text.endswith("data: [DONE]\n\n")


def test_a_stream_without_include_usage_keeps_llama_server_s_timings(gateway: Served, fakes: Fakes) -> None:
    """The gateway asks for the usage chunk (the ledger counts by it) and keeps it from a caller who did
    not: llama-server puts its ``timings`` on that chunk when asked, else on the finish chunk; the caller
    gets them where the server would have put them for its own request, on the finish chunk."""
    recorded = answer("llama_server_stream.sse")
    fakes.alpha.set_fault(Fault.recorded(recorded, "text/event-stream"), model="gpt-fake", times=1)
    events = sse_events(recorded.decode())
    finish, usage = events[-2], events[-1]
    assert finish["choices"][0]["finish_reason"] == "length"
    assert "timings" in usage
    response = post(gateway, "/v1/chat/completions", {**OPENAI_CHAT, "stream": True})
    assert response.status_code == 200, response.text
    got = sse_events(response.text)
    assert got[:-1] == [{**chunk, "model": "alpha/gpt-fake"} for chunk in events[:-2]]
    assert got[-1] == {**finish, "model": "alpha/gpt-fake", "timings": usage["timings"]}
    assert response.text.endswith("data: [DONE]\n\n")
    asked = {**OPENAI_CHAT, "stream": True, "stream_options": {"include_usage": True}}
    fakes.alpha.set_fault(Fault.recorded(recorded, "text/event-stream"), model="gpt-fake", times=1)
    response = post(gateway, "/v1/chat/completions", asked)  # asked for: as it came
    assert sse_events(response.text) == [{**chunk, "model": "alpha/gpt-fake"} for chunk in events]


def test_openai_to_openai_forwards_the_openai_beta_header(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.clear_requests()
    response = post(gateway, "/v1/chat/completions", OPENAI_CHAT, {"OpenAI-Beta": "assistants=v2"})
    assert response.status_code == 200, response.text
    (sent,) = fakes.alpha.requests
    assert sent.headers["openai-beta"] == "assistants=v2"


# -- Responses -> Responses (a provider declared `responses: true`) ----------------------------------

CODEX_LIKE: dict[str, Any] = {
    "model": "cl/responses",
    "instructions": "You are Codex.",
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "search the news"}]},
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-opaque"},
    ],
    "tools": [
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}, "strict": False},
        {"type": "namespace", "name": "mcp", "tools": [{"type": "function", "name": "ls", "parameters": {}}]},
        {"type": "web_search", "search_context_size": "medium"},
        {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark"}},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "0199-codex-session",
    "future_request_field": {"w": 4},
}


def test_responses_to_responses_sends_the_request_as_it_came(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.clear_requests()
    beta = {"OpenAI-Beta": "responses=experimental"}
    response = post(gateway, "/v1/responses", CODEX_LIKE, beta)
    assert response.status_code == 200, response.text
    assert "x-interlock-dropped" not in response.headers  # hosted tools and all: passed, not dropped
    (sent,) = fakes.alpha.requests
    assert sent.path == "/v1/responses"
    assert sent.body == {**CODEX_LIKE, "model": "gpt-fake"}
    assert sent.headers["openai-beta"] == "responses=experimental"
    assert [item["type"] for item in response.json()["output"]] == ["web_search_call", "message"]


def test_responses_to_responses_answers_field_for_field(gateway: Served, fakes: Fakes) -> None:
    recorded = answer("openai_response.json")
    fakes.alpha.set_fault(Fault.recorded(recorded), model="gpt-fake", times=1)
    response = post(gateway, "/v1/responses", CODEX_LIKE)
    assert response.status_code == 200, response.text
    assert response.json() == {**orjson.loads(recorded), "model": "cl/responses"}


def test_responses_to_responses_without_usage_is_still_the_upstream_s_answer(
    gateway: Served, fakes: Fakes
) -> None:
    recorded = {**orjson.loads(answer("openai_response.json")), "usage": None}
    fakes.alpha.set_fault(Fault.recorded(orjson.dumps(recorded)), model="gpt-fake", times=1)
    response = post(gateway, "/v1/responses", CODEX_LIKE)
    assert response.status_code == 200, response.text
    assert response.json() == {**recorded, "model": "cl/responses"}  # metered as estimated, sent as it came


def test_responses_to_responses_streams_every_event_as_it_came(gateway: Served, fakes: Fakes) -> None:
    recorded = answer("openai_response_stream.sse")
    fakes.alpha.set_fault(Fault.recorded(recorded, "text/event-stream"), model="gpt-fake", times=1)
    response = post(gateway, "/v1/responses", {**CODEX_LIKE, "stream": True})
    assert response.status_code == 200, response.text
    expected = sse_events(recorded.decode())
    for event in expected:
        if "response" in event:
            event["response"]["model"] = "cl/responses"
    assert sse_events(response.text) == expected
    names = [line[7:] for line in response.text.splitlines() if line.startswith("event: ")]
    assert names == [event["type"] for event in expected]  # web_search_call.* and annotation.added too


def test_a_responses_client_to_a_chat_upstream_names_the_hosted_tools(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.clear_requests()
    response = post(gateway, "/v1/responses", {**CODEX_LIKE, "model": "cl/openai"})
    assert response.status_code == 200, response.text
    dropped = response.headers["x-interlock-dropped"].split(", ")
    assert {"tools.web_search", "tools.custom", "include", "prompt_cache_key", "future_request_field"} <= set(
        dropped
    )
    (sent,) = fakes.alpha.requests
    assert sent.path == "/v1/chat/completions"
    names = [tool["function"]["name"] for tool in sent.body["tools"]]
    assert names == ["exec_command", "ls"]  # the namespace flattened into its function tools


# -- across formats --------------------------------------------------------------------------------


def test_anthropic_cache_usage_reaches_an_openai_client_as_cached_tokens(
    gateway: Served, fakes: Fakes
) -> None:
    fakes.claude.set_fault(Fault.recorded(answer("anthropic_message.json")), model="claude-fake", times=1)
    response = post(gateway, "/v1/chat/completions", {**OPENAI_CHAT, "model": "cl/claude"})
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    assert usage["prompt_tokens"] == 12 + 1253 + 2048  # OpenAI counts the cached input in the prompt
    assert usage["prompt_tokens_details"] == {"cached_tokens": 2048}
    assert response.json()["choices"][0]["message"]["reasoning"] == "The user greets me."


def test_an_anthropic_client_to_a_worker_names_what_it_cannot_carry(gateway: Served, fakes: Fakes) -> None:
    fakes.box.clear_requests()
    body = copy.deepcopy({**CLAUDE_CODE_LIKE, "model": "cl/local"})
    response = post(gateway, "/v1/messages", body, ANTHROPIC_HEADERS)
    assert response.status_code == 200, response.text
    dropped = set(response.headers["x-interlock-dropped"].split(", "))
    assert dropped == {
        "output_config",
        "context_management",
        "metadata",
        "future_request_field",
        "cache_control",
        "anthropic-beta",  # the betas it asked for: only an Anthropic upstream takes them
    }
    (sent,) = [r.body for r in fakes.box.requests if r.path == "/api/chat"]
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user", "system", "assistant", "tool"]  # the system turn where it was
    assert sent["messages"][-1]["content"] == "error: ls: denied"  # is_error, said in the text
