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
    result), the fake calls the first tool with ``tool_arguments``.
    """

    text: str = "Hello from {server}, model {model}."
    chunks: int | None = None
    chunk_delay_s: float = 0.0
    tool_arguments: Mapping[str, Any] = field(default_factory=lambda: {"city": "Paris"})

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
    return bool(
        isinstance(messages, list)
        and messages
        and isinstance(messages[-1], dict)
        and messages[-1].get("role") == "tool"
    )


def first_tool_name(tools: Any) -> str | None:
    if isinstance(tools, list) and tools and isinstance(tools[0], dict):
        function = tools[0].get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return str(function["name"])
    return None
