"""Across formats, each pair of a client's format and an upstream's: what the upstream's format can carry
is translated (reasoning settings, tool results marked as errors, cache usage), what it cannot is named in
``X-Interlock-Dropped`` and never sent. One row per pair (the table of docs/surfaces.md); the same-format
pairs are tests/clients/test_fidelity.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from interlock.testing.fake_server import FakeServer
from interlock.testing.faults import Fault
from tests.clients.conftest import Fakes
from tests.clients.test_fidelity import ANTHROPIC_HEADERS, CACHED, answer, post
from tests.e2e.harness import Served

ANTHROPIC: dict[str, Any] = {
    "max_tokens": 8192,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": CACHED}],
    "messages": [
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "denied", "is_error": True}
            ],
        },
    ],
    "tools": [
        {"name": "Bash", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ],
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "metadata": {"user_id": "u-1"},
}
RESPONSES: dict[str, Any] = {
    "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "news?"}]}],
    "tools": [{"type": "web_search"}, {"type": "function", "name": "ls", "parameters": {"type": "object"}}],
    "reasoning": {"effort": "high"},
    "include": ["reasoning.encrypted_content"],
}
OLLAMA: dict[str, Any] = {
    "messages": [{"role": "user", "content": "hi"}],
    "options": {"temperature": 0.1, "mirostat": 2},
    "keep_alive": "5m",
    "think": True,
    "stream": False,
}
CHAT: dict[str, Any] = {
    "messages": [{"role": "user", "content": "hi"}],
    "reasoning_effort": "high",
    "max_tokens": 8192,
    "store": True,
}


@dataclass(frozen=True)
class Pair:
    """A client format's request to an alias of another format: what the upstream gets, what is named."""

    path: str
    body: dict[str, Any]
    alias: str
    upstream: str  # the Fakes attribute that answers
    named: frozenset[str]  # in X-Interlock-Dropped (at least these)
    sent: Callable[[dict[str, Any]], bool]  # what the upstream got
    headers: dict[str, str] | None = None


def _tool_texts(body: dict[str, Any]) -> list[str]:
    return [m.get("content") for m in body.get("messages", []) if m.get("role") == "tool"]


PAIRS = {
    "anthropic->openai": Pair(
        "/v1/messages",
        ANTHROPIC,
        "cl/openai",
        "alpha",
        frozenset({"cache_control", "metadata", "tools.web_search_20250305", "think"}),
        lambda b: "think" not in b and _tool_texts(b) == ["error: denied"] and len(b["tools"]) == 1,
        ANTHROPIC_HEADERS,
    ),
    "anthropic->ollama": Pair(
        "/v1/messages",
        ANTHROPIC,
        "cl/local-think",
        "box",
        frozenset({"cache_control", "metadata", "tools.web_search_20250305"}),
        lambda b: b["think"] is True and _tool_texts(b) == ["error: denied"],
        ANTHROPIC_HEADERS,
    ),
    "responses->anthropic": Pair(
        "/v1/responses",
        RESPONSES,
        "cl/claude",
        "claude",
        frozenset({"tools.web_search", "include"}),
        lambda b: b["thinking"]["type"] == "enabled" and [t["name"] for t in b["tools"]] == ["ls"],
    ),
    "responses->ollama": Pair(
        "/v1/responses",
        RESPONSES,
        "cl/local-think",
        "box",
        frozenset({"tools.web_search", "include"}),
        lambda b: b["think"] == "high" and [t["function"]["name"] for t in b["tools"]] == ["ls"],
    ),
    "responses->openai": Pair(
        "/v1/responses",
        RESPONSES,
        "cl/openai",
        "alpha",
        frozenset({"tools.web_search", "include"}),
        lambda b: b["reasoning_effort"] == "high" and [t["function"]["name"] for t in b["tools"]] == ["ls"],
    ),
    "ollama->openai": Pair(
        "/api/chat",
        OLLAMA,
        "cl/openai",
        "alpha",
        frozenset({"keep_alive", "think", "options.mirostat"}),
        lambda b: b["temperature"] == 0.1 and "options" not in b and "think" not in b,
    ),
    "ollama->anthropic": Pair(
        "/api/chat",
        OLLAMA,
        "cl/claude",
        "claude",
        frozenset({"keep_alive", "options.mirostat"}),
        lambda b: b["thinking"]["type"] == "enabled" and b["temperature"] == 0.1,
    ),
    "openai->anthropic": Pair(
        "/v1/chat/completions",
        CHAT,
        "cl/claude",
        "claude",
        frozenset({"store"}),
        lambda b: b["thinking"] == {"type": "enabled", "budget_tokens": 8191} and "store" not in b,
    ),
    "openai->ollama": Pair(
        "/v1/chat/completions",
        CHAT,
        "cl/local-think",
        "box",
        frozenset({"store"}),
        lambda b: b["think"] == "high" and b["options"]["num_predict"] == 8192 and "store" not in b,
    ),
}


@pytest.mark.parametrize("pair", PAIRS.values(), ids=PAIRS.keys())
def test_what_cannot_be_carried_is_named_and_the_rest_translated(
    gateway: Served, fakes: Fakes, pair: Pair
) -> None:
    server: FakeServer = getattr(fakes, pair.upstream)
    server.clear_requests()
    response = post(gateway, pair.path, {**pair.body, "model": pair.alias}, pair.headers)
    assert response.status_code == 200, response.text
    named = set(response.headers.get("x-interlock-dropped", "").split(", "))
    assert pair.named <= named, named
    (sent,) = [r.body for r in server.requests if r.method == "POST"]
    assert pair.sent(sent), sent


def test_anthropic_cache_usage_reaches_a_responses_client_as_cached_tokens(
    gateway: Served, fakes: Fakes
) -> None:
    fakes.claude.set_fault(Fault.recorded(answer("anthropic_message.json")), model="claude-fake", times=1)
    response = post(gateway, "/v1/responses", {**RESPONSES, "model": "cl/claude"})
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    assert usage["input_tokens"] == 12 + 1253 + 2048
    assert usage["input_tokens_details"]["cached_tokens"] == 2048
