"""What a fake upstream answers: reply settings and the deterministic pieces of an answer."""

from __future__ import annotations

import base64
import hashlib
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Reply:
    """How a fake answers a chat request.

    ``text`` may hold ``{server}`` and ``{model}``, so a test can tell which upstream and model answered.
    ``chunks`` splits the text into that many stream chunks (None: one chunk per word); ``chunk_delay_s``
    waits between chunks. When the request offers tools (and the conversation does not end with a tool
    result), the fake calls the first tool with the arguments its schema implies (each required
    property, from ``tool_arguments`` where it names it, else a placeholder of the property's type), or
    ``tool_arguments`` itself for a tool without properties. ``tool_calls`` scripts the calls instead:
    ``(name, arguments)`` pairs, those whose tool the request offers are called, in order.
    ``usage=False``: the OpenAI fake's answers carry no ``usage`` (no usage chunk when streaming);
    ``claims`` overrides counts of the ``usage`` it sends (a hostile upstream:
    ``{"prompt_tokens": 2**64 - 1}``). ``reasoning``: the thinking the OpenAI fake's answer carries
    before its text, as llama-server with ``--reasoning-format deepseek`` splits it off: the message's
    ``reasoning_content``, or ``reasoning_content`` deltas before the ``content`` deltas of a stream
    (tests/fixtures/recorded/llama-server, recorded by ``tests/inference/record_wire.py``).
    """

    text: str = "Hello from {server}, model {model}."
    chunks: int | None = None
    chunk_delay_s: float = 0.0
    tool_arguments: Mapping[str, Any] = field(default_factory=lambda: {"city": "Paris"})
    tool_calls: tuple[tuple[str, Mapping[str, Any]], ...] | None = None
    usage: bool = True  # False: the OpenAI fake reports no usage (as some compatible servers do)
    claims: Mapping[str, int] | None = None  # counts sent in place of the counted ones
    reasoning: str | None = None  # thinking before the text (as ``reasoning_content``, llama-server's field)

    def render(self, server: str, model: str) -> str:
        return self.text.replace("{server}", server).replace("{model}", model)


def split_text(text: str, chunks: int | None) -> list[str]:
    """``text`` as stream pieces that join back to it exactly: ``chunks`` near-equal pieces, or per word."""
    if not text:
        return [""]
    if chunks is None:
        words = text.split(" ")
        return [w + " " for w in words[:-1]] + [words[-1]] if len(words) > 1 else [text]
    chunks = max(1, min(chunks, len(text)))
    size, extra = divmod(len(text), chunks)
    pieces, start = [], 0
    for i in range(chunks):
        end = start + size + (1 if i < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def count_words(messages: Any) -> int:
    """A stand-in token count for a request's messages: whitespace-separated words of every text part."""
    total = 0
    if not isinstance(messages, list):
        return 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            total += len(content.split())
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += len(part["text"].split())
    return total


def embedding_for(text: str, dimensions: int) -> list[float]:
    """A deterministic unit-free vector for ``text`` (same text, same vector)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [round((digest[i % len(digest)] - 128) / 128, 6) for i in range(dimensions)]


def embedding_base64(vector: Sequence[float]) -> str:
    """OpenAI's ``encoding_format: base64``: little-endian float32s, base64-encoded."""
    packed = struct.pack(f"<{len(vector)}f", *vector)
    return base64.b64encode(packed).decode()


def last_is_tool_result(messages: Any) -> bool:
    """Whether an OpenAI- or Ollama-shaped conversation ends with a tool result."""
    return bool(
        isinstance(messages, list)
        and messages
        and isinstance(messages[-1], dict)
        and messages[-1].get("role") == "tool"
    )


def answers_a_tool_use(messages: Any) -> bool:
    """Whether an Anthropic-shaped conversation ends with a user turn holding a ``tool_result``."""
    last = messages[-1] if isinstance(messages, list) and messages else None
    content = last.get("content") if isinstance(last, dict) else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


_PLACEHOLDERS: dict[str, Any] = {
    "string": "text",
    "integer": 1,
    "number": 1.5,
    "boolean": True,
    "array": [],
    "object": {},
    "null": None,
}


def tools_by_name(tools: Any) -> dict[str, Mapping[str, Any]]:
    """The function tools a request offers, by name, in order, as OpenAI ``function`` objects (an
    Anthropic tool's ``input_schema`` read as ``parameters``; tools of other kinds left out)."""
    out: dict[str, Mapping[str, Any]] = {}
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out[function["name"]] = function
        elif isinstance(tool.get("name"), str) and "input_schema" in tool:
            out[tool["name"]] = {"name": tool["name"], "parameters": tool["input_schema"]}
    return out


def implied_arguments(function: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for a call of ``function`` that fit its JSON schema (see ``Reply``)."""
    schema = function.get("parameters")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return dict(defaults)
    required = schema.get("required") if isinstance(schema, dict) else None
    names = [n for n in required if n in properties] if isinstance(required, list) else list(properties)
    out: dict[str, Any] = {}
    for name in names:
        spec = properties[name] if isinstance(properties[name], dict) else {}
        if name in defaults:
            out[name] = defaults[name]
        elif isinstance(spec.get("enum"), list) and spec["enum"]:
            out[name] = spec["enum"][0]
        else:
            kind = spec.get("type")
            out[name] = _PLACEHOLDERS.get(kind if isinstance(kind, str) else "string", "text")
    return out


def planned_calls(reply: Reply, tools: Any, answered: bool) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls a fake answers with: none when the conversation ends with a tool result
    (``answered``), else those scripted in ``reply.tool_calls`` or one implied for the first tool."""
    offered = tools_by_name(tools)
    if not offered or answered:
        return []
    if reply.tool_calls is not None:
        return [(name, dict(arguments)) for name, arguments in reply.tool_calls if name in offered]
    name, function = next(iter(offered.items()))
    return [(name, implied_arguments(function, reply.tool_arguments))]
