"""Reasoning across a session (issue 38 items 1 and 9): an OpenAI-compatible upstream that thinks as the
real llama-server does (``--reasoning-format deepseek``: the thinking in ``reasoning_content``,
tests/fixtures/recorded/llama-server, recorded by ``tests/inference/record_wire.py``) gives a Claude
Code-shaped client thinking blocks and a Codex-shaped one a reasoning item; the next turn sends them back,
and the upstream gets that thinking back as ``reasoning_content``, the one field llama-server reads into
its prompt (``template_reads.json``: ``reasoning`` and ``thinking`` never reach the model). The alias's
reasoning contract in the plan says the same (``reasoning_content``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.base.errors import InvalidRequest
from interlock.runtime.wire import ollama, ollama_caller
from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from interlock.testing.replies import Reply
from tests.runtime.conftest import build

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "recorded" / "llama-server"
SAID = json.loads((RECORDED / "reasoning_chat.json").read_text())["choices"][0]["message"]
THOUGHT, ANSWER = SAID["reasoning_content"], SAID["content"]

CONFIG = """\
version: 1
server: {{default_alias: local/agent, alias_namespace: local/}}
providers:
  llama: {{kind: openai, base_url: "{url}", probe: false}}
models:
  llama/smollm2: {{context_tokens: 8192, capabilities: [completion, tools, thinking]}}
aliases:
  local/agent: {{description: a thinking local model, chain: [llama/smollm2]}}
"""
TOOLS = [
    {
        "name": "Bash",
        "description": "Run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]


def claude_code(messages: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    """A Messages request as Claude Code 2.1.337 shapes one: system blocks, tools, adaptive thinking."""
    return {
        "model": "local/agent",
        "max_tokens": 2048,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": messages,
        "tools": TOOLS,
        "thinking": {"type": "adaptive"},
        "stream": stream,
    }


@dataclass
class Rig:
    upstream: FakeOpenAI
    plan: Any
    post: Callable[[str, dict[str, Any]], httpx.Response]
    get: Callable[[str], httpx.Response]

    def sent(self) -> list[dict[str, Any]]:
        """The messages of each chat request the upstream got."""
        return [r.body["messages"] for r in self.upstream.requests if r.path.endswith("/chat/completions")]


@pytest.fixture
def rig(plan_data: Callable[[str], dict[str, Any]]) -> Iterator[Rig]:
    with FakeOpenAI(name="llama", reply=Reply(text=ANSWER, reasoning=THOUGHT, tool_calls=())) as upstream:
        plan = build(plan_data(CONFIG.format(url=upstream.base_url)))
        gateway = build_gateway(plan, probes=False)
        loop = asyncio.new_event_loop()
        loop.run_until_complete(gateway.startup())
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway), base_url="http://t")

        def post(path: str, body: dict[str, Any]) -> httpx.Response:
            return loop.run_until_complete(http.post(path, json=body))

        def get(path: str) -> httpx.Response:
            return loop.run_until_complete(http.get(path))

        try:
            yield Rig(upstream, plan, post, get)
        finally:
            loop.run_until_complete(http.aclose())
            loop.run_until_complete(gateway.shutdown())
            loop.close()


def sse_data(text: str) -> list[dict[str, Any]]:
    return [orjson.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def test_the_fake_says_what_the_recorded_llama_server_said(rig: Rig) -> None:
    """The fake's answer has the recorded answer's message, and its stream the recorded order of deltas:
    the role, ``reasoning_content`` pieces, ``content`` pieces, the finish."""
    body = {"model": "smollm2", "messages": [{"role": "user", "content": "say hi"}]}
    with httpx.Client(base_url=rig.upstream.base_url) as http:
        message = http.post("/chat/completions", json=body).json()["choices"][0]["message"]
        streamed = sse_data(http.post("/chat/completions", json={**body, "stream": True}).text)
    assert message == SAID
    recorded = sse_data((RECORDED / "reasoning_stream.txt").read_text())
    for events in (recorded, streamed):
        deltas = [e["choices"][0]["delta"] for e in events]
        order = [next(iter(d), "finish") for d in deltas]
        collapsed = [k for n, k in enumerate(order) if n == 0 or order[n - 1] != k]
        assert collapsed == ["role", "reasoning_content", "content", "finish"]
        assert "".join(d.get("reasoning_content", "") for d in deltas) == THOUGHT
        assert "".join(d.get("content") or "" for d in deltas) == ANSWER


def test_the_plan_s_reasoning_contract_is_the_field_that_goes_back(rig: Rig) -> None:
    """The contract compiled for the alias (and shown in ``/v1/aliases``) names the field the round trip
    below carries: plain ``reasoning_content`` text, which any candidate of that contract takes."""
    listed = rig.get("/v1/aliases").json()
    alias = next(a for a in listed["data"] if a["name"] == "local/agent")
    assert [r["contract"] for r in alias["contract"]["reasoning"]] == ["reasoning_content"]


def _thinking_of(answer: httpx.Response, stream: bool) -> tuple[str, str]:
    """(thinking, text) of a Messages answer, whole or streamed."""
    if not stream:
        blocks = answer.json()["content"]
        assert [b["type"] for b in blocks] == ["thinking", "text"]
        return blocks[0]["thinking"], blocks[1]["text"]
    events = sse_data(answer.text)
    thinking = "".join(e["delta"].get("thinking", "") for e in events if e["type"] == "content_block_delta")
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["thinking", "text"]
    return thinking, text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_messages_thinking_goes_out_as_blocks_and_back_as_reasoning_content(rig: Rig, stream: bool) -> None:
    first = [{"role": "user", "content": [{"type": "text", "text": "say hi"}]}]
    answer = rig.post("/v1/messages", claude_code(first, stream))
    assert answer.status_code == 200, answer.text
    thinking, text = _thinking_of(answer, stream)
    assert (thinking, text) == (THOUGHT, ANSWER)
    # the next turn, as Claude Code sends it: the assistant's blocks as they came (signature and all)
    blocks = [{"type": "thinking", "thinking": thinking, "signature": ""}, {"type": "text", "text": text}]
    again = [*first, {"role": "assistant", "content": blocks}, {"role": "user", "content": "and again"}]
    answer = rig.post("/v1/messages", claude_code(again, stream))
    assert answer.status_code == 200, answer.text
    turn = rig.sent()[-1][-2]
    assert turn["role"] == "assistant"
    assert turn["reasoning_content"] == THOUGHT  # what llama-server reads back into the prompt
    assert "reasoning" not in turn  # llama-server ignores it (template_reads.json)
    assert turn["content"] == ANSWER


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_recorded_llama_server_answer_itself_becomes_thinking_blocks(rig: Rig, stream: bool) -> None:
    """The bytes llama-server sent (its JSON answer, its whole SSE stream), replayed as they are."""
    name, kind = ("reasoning_stream.txt", "text/event-stream") if stream else ("reasoning_chat.json", "")
    rig.upstream.set_fault(Fault.recorded((RECORDED / name).read_bytes(), kind or "application/json"))
    first = [{"role": "user", "content": "say hi"}]
    answer = rig.post("/v1/messages", claude_code(first, stream))
    assert answer.status_code == 200, answer.text
    assert _thinking_of(answer, stream) == (THOUGHT, ANSWER)


def test_a_stream_cut_mid_thinking_ends_with_an_error_event(rig: Rig) -> None:
    """Thinking is content: a stream cut after it began is not walked on silently (the role and two
    thinking deltas, then the connection drops); the client's stream ends with Messages' error event."""
    rig.upstream.set_fault(Fault.cut_stream(after_chunks=3))
    answer = rig.post("/v1/messages", claude_code([{"role": "user", "content": "say hi"}], True))
    assert answer.status_code == 200
    events = sse_data(answer.text)
    assert [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"] == ["thinking"]
    assert events[-1]["type"] == "error"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_responses_reasoning_item_goes_back_as_reasoning_content(rig: Rig, stream: bool) -> None:
    """Codex's way: the reasoning item of an answer is sent back in the next turn's ``input``."""
    first: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "say hi"}]
    body = {"model": "local/agent", "input": first, "reasoning": {"effort": "medium"}, "stream": stream}
    answer = rig.post("/v1/responses", body)
    assert answer.status_code == 200, answer.text
    if stream:
        done = [e for e in sse_data(answer.text) if e["type"] == "response.completed"]
        output = done[0]["response"]["output"]
    else:
        output = answer.json()["output"]
    assert [item["type"] for item in output] == ["reasoning", "message"]
    assert [part["text"] for part in output[0]["summary"]] == [THOUGHT]
    again = [*first, *output, {"type": "message", "role": "user", "content": "and again"}]
    answer = rig.post("/v1/responses", {**body, "input": again})
    assert answer.status_code == 200, answer.text
    turn = rig.sent()[-1][-2]
    assert (turn["role"], turn["reasoning_content"]) == ("assistant", THOUGHT)
    assert "reasoning" not in turn


def test_an_ollama_upstream_gets_an_earlier_turn_s_thinking_as_its_own_field() -> None:
    messages = [
        {"role": "user", "content": "say hi"},
        {"role": "assistant", "content": ANSWER, "reasoning_content": THOUGHT},
        {"role": "user", "content": "and again"},
    ]
    request = ollama.chat_request({"messages": messages}, "qwen3:0.6b", stream=False)
    assert request["messages"][1] == {"role": "assistant", "content": ANSWER, "thinking": THOUGHT}


ANTHROPIC_CONFIG = """\
version: 1
server: {{default_alias: cloud/agent, alias_namespace: cloud/}}
providers:
  claude: {{kind: anthropic, base_url: "{url}", probe: false, api_key_env: CLOUD_KEY}}
aliases:
  cloud/agent: {{description: an anthropic model, chain: [claude/c1]}}
"""


def test_an_earlier_turn_s_reasoning_an_anthropic_upstream_is_not_sent_is_named(
    plan_data: Callable[[str], dict[str, Any]],
) -> None:
    """Anthropic takes back only thinking it signed: an earlier turn's ``reasoning_content`` (a chat
    caller's, or a Responses reasoning item's) is not sent to it, and ``X-Interlock-Dropped`` says so."""
    turns = [
        {"role": "user", "content": "say hi"},
        {"role": "assistant", "content": ANSWER, "reasoning_content": THOUGHT},
        {"role": "user", "content": "and again"},
    ]
    reasoned = [
        {"type": "message", "role": "user", "content": "say hi"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": THOUGHT}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": ANSWER}]},
        {"type": "message", "role": "user", "content": "and again"},
    ]
    asks = [
        ("/v1/chat/completions", {"model": "cloud/agent", "messages": turns}),
        ("/v1/responses", {"model": "cloud/agent", "input": reasoned}),
        ("/v1/chat/completions", {"model": "cloud/agent", "messages": [turns[0]]}),  # nothing to name
    ]
    with FakeAnthropic(name="claude", api_key="sk-cloud-secret") as claude:
        plan = build(plan_data(ANTHROPIC_CONFIG.format(url=claude.url)), {"CLOUD_KEY": "sk-cloud-secret"})
        gateway = build_gateway(plan, probes=False)
        loop = asyncio.new_event_loop()
        loop.run_until_complete(gateway.startup())
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway), base_url="http://t")
        try:
            said = []
            for path, body in asks:
                answer = loop.run_until_complete(http.post(path, json=body))
                assert answer.status_code == 200, answer.text
                said.append(answer.headers.get("x-interlock-dropped"))
        finally:
            loop.run_until_complete(http.aclose())
            loop.run_until_complete(gateway.shutdown())
            loop.close()
    sent = [r.body["messages"] for r in claude.requests if r.path.endswith("/messages")]
    assert all(THOUGHT not in str(messages) for messages in sent)
    assert said == ["messages.reasoning_content", "messages.reasoning_content", None]


def test_an_ollama_caller_s_earlier_thinking_goes_on_as_reasoning_content_if_it_is_text() -> None:
    """An Ollama-native turn's ``thinking`` becomes the internal form's ``reasoning_content``; anything
    but a string is refused where it enters, as a Messages thinking block's is (it went to the upstream
    as it came)."""
    turn = {"role": "assistant", "content": ANSWER, "thinking": THOUGHT}
    assert ollama_caller.internal_message(1, turn, {})["reasoning_content"] == THOUGHT
    for bad in ({"text": THOUGHT}, 5, [THOUGHT], True):
        with pytest.raises(InvalidRequest, match=r"messages\[1\]\.thinking"):
            ollama_caller.internal_message(1, {**turn, "thinking": bad}, {})
