"""Record what the real ``llama-server`` says about reasoning and tool calls, for the fakes to say it too.

``python -m tests.inference.record_wire`` starts llama-server (the ``xllamacpp`` wheel, SmolLM2-135M) with
``tests/inference/chatml_tools.jinja`` as its chat template and ``--reasoning-format deepseek``, and writes
under ``tests/fixtures/recorded/llama-server/``:

- ``props.json``: ``GET /props`` (``chat_template_caps``: tools and preserved reasoning supported);
- ``reasoning_chat.json`` / ``reasoning_stream.txt``: an answer whose thinking llama-server split off into
  ``reasoning_content`` (the message's field; in a stream, deltas of ``reasoning_content`` before the
  ``content`` deltas). SmolLM2 does not think by itself: a GBNF grammar has it write ``<think>...</think>``
  and the answer, as a reasoning model would; the split is the server's own;
- ``tool_call_chat.json`` / ``tool_call_stream.txt``: a tool call the server parsed from the model's
  ``<tool_call>`` text (the model is asked to write that call back, which it does at temperature 0);
- ``template_reads.json``: ``POST /apply-template`` of an earlier assistant turn that carries its thinking
  as ``reasoning_content``, as ``reasoning`` and as ``thinking``: the prompt each became (only
  ``reasoning_content`` reaches the model's prompt).

Volatile fields (``id``, ``created``, ``timings``' speeds) are written as they came: tests compare shapes
and texts, never those.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from tests.inference.llama import LlamaServer, require_parts

TEMPLATE = Path(__file__).with_name("chatml_tools.jinja")
OUT = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "llama-server"

THOUGHT = "The user greets me. I greet back."
ANSWER = "Hello!"
# llama.cpp's GBNF: the model writes a thinking block, then its answer
THINKING_GRAMMAR = f'root ::= "<think>{THOUGHT}</think>{ANSWER}"'
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
ECHO = "Reply with exactly this text and nothing else:\n"  # what makes SmolLM2 write a call


def reasoning_request() -> dict[str, Any]:
    messages = [{"role": "user", "content": "say hi"}]
    return {"messages": messages, "max_tokens": 40, "grammar": THINKING_GRAMMAR}


def tool_request() -> dict[str, Any]:
    messages = [{"role": "user", "content": ECHO + CALL_TEXT}]
    return {"messages": messages, "tools": [WEATHER], "max_tokens": 60, "temperature": 0}


AGAIN = {"role": "user", "content": "again"}


def earlier_turn(field: str) -> dict[str, Any]:
    assistant = {"role": "assistant", "content": ANSWER, field: THOUGHT}
    return {"messages": [{"role": "user", "content": "say hi"}, assistant, AGAIN]}


def record(server: LlamaServer, out: Path) -> None:
    # a connection per request: llama-server closed a kept-alive one after a stream
    with httpx.Client(base_url=server.url, timeout=120, headers={"connection": "close"}) as http:
        (out / "props.json").write_text(json.dumps(http.get("/props").json(), indent=1) + "\n")
        for name, body in (("reasoning", reasoning_request()), ("tool_call", tool_request())):
            answer = http.post("/v1/chat/completions", json=body)
            answer.raise_for_status()
            (out / f"{name}_chat.json").write_text(json.dumps(answer.json(), indent=1) + "\n")
            streamed = http.post("/v1/chat/completions", json={**body, "stream": True})
            streamed.raise_for_status()
            (out / f"{name}_stream.txt").write_text(streamed.text)
        reads = {
            field: http.post("/apply-template", json=earlier_turn(field)).json()["prompt"]
            for field in ("reasoning_content", "reasoning", "thinking")
        }
        (out / "template_reads.json").write_text(json.dumps(reads, indent=1) + "\n")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "llama.log"
        settings: dict[str, Any] = {"n_ctx": 2048, "temperature": 0.0}
        with LlamaServer(
            require_parts(), log, chat_template=TEMPLATE, reasoning_format="deepseek", **settings
        ) as server:
            record(server, OUT)
    print(f"recorded under {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
