"""Tool calls and reasoning through the gateway, at the wire level, with the real llama-server (issue 38
item 9): a tool-call round trip in both wire formats the agents speak (Anthropic Messages as Claude Code
sends it, OpenAI Responses as Codex sends it), and an earlier turn's thinking reaching the server's prompt.

The server: llama-server (the ``xllamacpp`` wheel) with SmolLM2-135M and
``tests/inference/chatml_tools.jinja`` as its chat template, ``--reasoning-format deepseek``. SmolLM2's
own template has no tool support (``/props``: ``supports_tools: false``) and llama-server then ignores a
request's tools: asked for a tool call, even with ``tool_choice: required``, it answers in text (measured;
no generic tool-call format in this build). With a ChatML template that writes tools (Hermes' and Qwen's
``<tool_call>`` format), the server finds the tool-call and thinking markers and parses the model's
output; SmolLM2 does not decide to call a tool, so the user asks it to write the call back, which it does
at temperature 0, and the server turns that text into a real ``tool_calls`` answer. What the server got is
read from a recording proxy between the gateway and the server (``interlock.testing.recorder``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from aiohttp import web
from ruamel.yaml import YAML

from interlock.cli import main
from interlock.commands.gateway import build_gateway
from interlock.testing.recorder import Recorder
from tests.inference.llama import LlamaServer
from tests.inference.record_wire import ANSWER, CALL_TEXT, ECHO, TEMPLATE, THOUGHT, WEATHER
from tests.runtime.conftest import build, compile_text
from tests.waiting import until

pytestmark = pytest.mark.timeout(900)

CONFIG = """\
version: 1
server: {{default_alias: real/agent, alias_namespace: real/}}
providers:
  llama:
    kind: openai
    probe: false
    base_url: "{url}/v1"
    timeouts: {{connect: 2s, first_byte: 300s, total: 600s}}
models:
  llama/smollm2: {{context_tokens: 2048, capabilities: [completion, tools, thinking]}}
aliases:
  real/agent: {{description: the real model with a tool template, chain: [llama/smollm2]}}
"""
FUNCTION = WEATHER["function"]
ANTHROPIC_TOOL = {"name": FUNCTION["name"], "description": FUNCTION["description"]}
ANTHROPIC_TOOL["input_schema"] = FUNCTION["parameters"]
RESPONSES_TOOL = {"type": "function", **FUNCTION}
RESULT = "Sunny, 21 C."


@pytest.fixture(scope="module")
def tool_server(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("tools") / "server.log"
    settings: dict[str, Any] = {"n_ctx": 2048, "temperature": 0.0, "reasoning_format": "deepseek"}
    with LlamaServer(model, log, chat_template=TEMPLATE, **settings) as server:
        yield server


@dataclass
class Rig:
    """The gateway in front of a recording proxy in front of the server, on one event loop."""

    loop: asyncio.AbstractEventLoop
    http: httpx.AsyncClient
    records: Path
    server: LlamaServer

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.loop.run_until_complete(self.http.post(path, json=body))

    def sent(self, count: int) -> list[dict[str, Any]]:
        """The chat request bodies the server got, in order, once there are ``count``: the proxy writes
        a record as it relays the answer's end, which the gateway may have passed on already (the
        proxy runs on this loop: it is run until the record is there)."""
        self.loop.run_until_complete(until(lambda: len(self._chats()) >= count, "the proxy's records"))
        return self._chats()

    def _chats(self) -> list[dict[str, Any]]:
        lines = self.records.read_text().splitlines() if self.records.exists() else []
        records = [json.loads(line) for line in lines]
        return [r["body"] for r in records if r["path"].endswith("/chat/completions")]


@pytest.fixture
def rig(tmp_path: Path, tool_server: LlamaServer) -> Iterator[Rig]:
    loop = asyncio.new_event_loop()
    records = tmp_path / "sent.jsonl"
    recorder = Recorder(tool_server.url, records, "interlock")
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    proxy = f"http://127.0.0.1:{runner.addresses[0][1]}"
    gateway = build_gateway(build(compile_text(tmp_path, CONFIG.format(url=proxy))), probes=False)
    loop.run_until_complete(gateway.startup())
    transport = httpx.ASGITransport(app=gateway)
    http = httpx.AsyncClient(transport=transport, base_url="http://t", timeout=600)
    try:
        yield Rig(loop, http, records, tool_server)
    finally:
        loop.run_until_complete(http.aclose())
        loop.run_until_complete(gateway.shutdown())
        loop.run_until_complete(recorder.close())
        loop.run_until_complete(runner.cleanup())
        loop.close()


def sse_data(text: str) -> list[dict[str, Any]]:
    return [orjson.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def messages_blocks(text: str) -> tuple[list[dict[str, Any]], str | None]:
    """A streamed Messages answer's content blocks (as Claude Code rebuilds them) and its stop reason."""
    blocks: list[dict[str, Any]] = []
    partial: list[str] = []
    stop = None
    for event in sse_data(text):
        if event["type"] == "content_block_start":
            blocks.append(dict(event["content_block"]))
            partial = []
        elif event["type"] == "content_block_delta":
            delta, block = event["delta"], blocks[-1]
            if delta["type"] == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta["type"] == "input_json_delta":
                partial.append(delta["partial_json"])
        elif event["type"] == "content_block_stop" and blocks[-1]["type"] == "tool_use" and partial:
            blocks[-1]["input"] = json.loads("".join(partial))
        elif event["type"] == "message_delta":
            stop = event["delta"].get("stop_reason")
    return blocks, stop


def claude_code(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Claude Code's shape: streamed, tools offered on every turn, its thinking setting."""
    return {
        "model": "real/agent",
        "max_tokens": 48,
        "messages": messages,
        "tools": [ANTHROPIC_TOOL],
        "thinking": {"type": "adaptive"},
        "stream": True,
    }


def test_a_messages_tool_call_round_trip_on_the_real_server(rig: Rig) -> None:
    first = [{"role": "user", "content": ECHO + CALL_TEXT}]
    answer = rig.post("/v1/messages", claude_code(first))
    assert answer.status_code == 200, answer.text
    blocks, stop = messages_blocks(answer.text)
    calls = [b for b in blocks if b["type"] == "tool_use"]
    assert stop == "tool_use", blocks
    assert [(c["name"], c["input"]) for c in calls] == [("get_weather", {"city": "Paris"})]
    result = {"type": "tool_result", "tool_use_id": calls[0]["id"], "content": RESULT}
    again = [*first, {"role": "assistant", "content": blocks}, {"role": "user", "content": [result]}]
    answer = rig.post("/v1/messages", claude_code(again))
    assert answer.status_code == 200, answer.text
    blocks, stop = messages_blocks(answer.text)
    assert stop in ("end_turn", "max_tokens"), blocks
    assert [b["type"] for b in blocks] == ["text"]
    assert blocks[0]["text"].strip()
    sent = rig.sent(2)[-1]["messages"]  # what the server got for the second turn
    call = sent[-2]["tool_calls"][0]
    assert (sent[-2]["role"], call["function"]["name"]) == ("assistant", "get_weather")
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert sent[-1] == {"role": "tool", "tool_call_id": calls[0]["id"], "content": RESULT}


def test_a_responses_tool_call_round_trip_on_the_real_server(rig: Rig) -> None:
    """Codex's way: streamed, the function call and its output as ``input`` items of the next turn."""
    first: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ECHO + CALL_TEXT}]}
    ]
    body = {"model": "real/agent", "input": first, "tools": [RESPONSES_TOOL], "stream": True}
    body["max_output_tokens"] = 48
    answer = rig.post("/v1/responses", body)
    assert answer.status_code == 200, answer.text
    output = next(e for e in sse_data(answer.text) if e["type"] == "response.completed")["response"]["output"]
    calls = [item for item in output if item["type"] == "function_call"]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("get_weather", {"city": "Paris"})]
    result = {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": RESULT}
    answer = rig.post("/v1/responses", {**body, "input": [*first, *output, result]})
    assert answer.status_code == 200, answer.text
    done = next(e for e in sse_data(answer.text) if e["type"] == "response.completed")["response"]
    assert [item["type"] for item in done["output"]] == ["message"], done["output"]
    assert done["output"][0]["content"][0]["text"].strip()
    sent = rig.sent(2)[-1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == calls[0]["call_id"]
    assert sent[-1] == {"role": "tool", "tool_call_id": calls[0]["call_id"], "content": RESULT}


def _count(server: LlamaServer, body: dict[str, Any]) -> int:
    """The server's own count of a chat request's prompt: its template rendered, then tokenized."""
    prompt = httpx.post(f"{server.url}/apply-template", json=body, timeout=60).json()["prompt"]
    tokens = httpx.post(f"{server.url}/tokenize", json={"content": prompt}, timeout=60).json()["tokens"]
    return len(tokens)


def test_an_earlier_turn_s_thinking_reaches_the_real_server_s_prompt(rig: Rig) -> None:
    """Claude Code sends the thinking block of the answer before back; the server reads it into the
    prompt: the same turns without it count exactly the thinking's tokens fewer (by the server's own
    count, which the answer's usage is). Before, it went as ``reasoning``, which the server
    ignores: both counted the same."""
    thinking = {"type": "thinking", "thinking": THOUGHT, "signature": ""}
    counted = []
    for said in ([thinking, {"type": "text", "text": ANSWER}], [{"type": "text", "text": ANSWER}]):
        turns = [
            {"role": "user", "content": "say hi"},
            {"role": "assistant", "content": said},
            {"role": "user", "content": "again"},
        ]
        answer = rig.post("/v1/messages", {**claude_code(turns), "tools": [], "stream": False})
        assert answer.status_code == 200, answer.text
        usage = answer.json()["usage"]  # Anthropic's: the prompt less what was read from the cache
        counted.append(usage["input_tokens"] + usage.get("cache_read_input_tokens", 0))
    with_it, without = rig.sent(2)[-2:]
    assert with_it["messages"][1]["reasoning_content"] == THOUGHT
    assert "reasoning_content" not in without["messages"][1]
    rendered = _count(rig.server, with_it) - _count(rig.server, without)
    assert rendered > 0  # the template writes it (<think>...</think>)
    assert counted[0] - counted[1] == rendered


def test_init_declares_thinking_where_the_template_writes_reasoning_back(
    tool_server: LlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``init --discover`` on this server declares ``tools`` and ``thinking`` (its template writes an
    earlier turn's ``reasoning_content`` back: ``supports_preserve_reasoning``), so the plan's reasoning
    contract for it is ``reasoning_content``, what the round trips above carry. SmolLM2's own template
    says neither (tests/inference/test_init_llama.py: ``[completion, tools]``, contract ``none``)."""
    out = tmp_path / "interlock.yaml"
    assert main(["init", "--discover", f"{tool_server.url}/v1", "-o", str(out)]) == 0
    capsys.readouterr()
    config = YAML().load(out.read_text())
    (model,) = config["models"].values()
    assert list(model["capabilities"]) == ["completion", "tools", "thinking"]
    plan = compile_text(tmp_path, out.read_text())
    contracts = {name: alias["contract"]["reasoning"] for name, alias in plan["aliases"].items()}
    assert {r["contract"] for chain in contracts.values() for r in chain} == {"reasoning_content"}
