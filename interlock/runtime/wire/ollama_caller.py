"""Ollama's native API, the caller's side: an Ollama request (``/api/chat``, ``/api/generate``) as the
internal form, and the answer, its NDJSON lines and its errors in Ollama's shape (what the Ollama surface
picks per request; the upstream side, for the adapter, is ``wire.ollama``).

Messages' base64 ``images`` become ``data:`` image parts (the media type sniffed), tool calls get ids and
JSON-string arguments, a tool message's ``tool_name`` is matched to the call it answers; native
``options``, ``format``, ``keep_alive``, ``think`` and ``tools`` travel as they are (``PASSED``). A stream's
lines carry the text as it comes, tool calls whole in the last line with ``done: true``, ``done_reason``
and the counts; a worker's own lines (a relay) go as they came, but for the model's name.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson

from interlock.runtime.base.asgi import Header, json_type
from interlock.runtime.base.errors import InvalidRequest
from interlock.runtime.wire.base import RelayedChunk, StreamRender
from interlock.runtime.wire.openai_chat import call_arguments, first_choice, reasoning

NDJSON_HEADERS: tuple[Header, ...] = (
    (b"content-type", b"application/x-ndjson"),
    (b"cache-control", b"no-cache"),
)
VERSION = "0.9.0"  # the Ollama API level this surface speaks (clients check it)


def error_body(message: str) -> bytes:
    return orjson.dumps({"error": message})


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())


# the first base64 characters of each image type Ollama models read (JPEG, PNG, GIF, WebP)
IMAGE_TYPES = (("/9j/", "image/jpeg"), ("iVBOR", "image/png"), ("R0lG", "image/gif"), ("UklG", "image/webp"))


def data_url(image: str) -> str:
    """A message's base64 ``images`` entry as a ``data:`` URL, its media type sniffed (else PNG)."""
    mime = next((m for prefix, m in IMAGE_TYPES if image.startswith(prefix)), "image/png")
    return f"data:{mime};base64,{image}"


PASSED = ("options", "format", "keep_alive", "think", "tools")  # native fields the internal form carries
DONE_REASONS = {"stop": "stop", "length": "length", "tool_calls": "stop", "content_filter": "stop"}


def native_function(name: Any, arguments: Any) -> dict[str, Any]:
    """One native tool call (Ollama's arguments are an object)."""
    return {"function": {"name": name, "arguments": arguments}}


def _data_url(image: Any, where: str) -> dict[str, Any]:
    if not isinstance(image, str) or not image:
        raise InvalidRequest(f"`{where}` must be a base64 string")
    return {"type": "image_url", "image_url": {"url": data_url(image)}}


def internal_message(index: int, message: Any, call_ids: dict[str, str]) -> dict[str, Any]:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise InvalidRequest(f"`{where}` must be an object, not {json_type(message)}")
    role = message.get("role")
    if not isinstance(role, str):
        raise InvalidRequest(f"`{where}.role` must be a string")
    content = message.get("content")
    if content is None:
        content = ""
    elif not isinstance(content, str):  # `[]` or `false` too: never read as no content
        raise InvalidRequest(f"`{where}.content` must be a string")
    out: dict[str, Any] = {"role": role, "content": content}
    images = message.get("images")
    if images is not None and not isinstance(images, list):
        raise InvalidRequest(f"`{where}.images` must be an array of base64 strings")
    if images:
        parts: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
        parts.extend(_data_url(image, f"{where}.images[{n}]") for n, image in enumerate(images))
        out["content"] = parts
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise InvalidRequest(f"`{where}.tool_calls` must be an array")
    if calls:
        out["tool_calls"] = [
            _internal_call(call, f"{where}.tool_calls[{n}]", call_ids) for n, call in enumerate(calls)
        ]
    # a tool message: the call it answers, by its id when the client sent one (Open WebUI does), else by name
    if role == "tool":
        name = message.get("tool_name") or message.get("name")
        given = message.get("tool_call_id")
        by_name = call_ids.get(name, f"call_{index}") if isinstance(name, str) else f"call_{index}"
        out["tool_call_id"] = given if isinstance(given, str) and given else by_name
    thinking = message.get("thinking")
    if thinking and role == "assistant":
        if not isinstance(thinking, str):
            raise InvalidRequest(f"`{where}.thinking` must be a string")
        out["reasoning_content"] = thinking
    return out


def _internal_call(call: Any, where: str, call_ids: dict[str, str]) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InvalidRequest(f"`{where}.function.name` must be a string")
    name = function["name"]
    arguments = function.get("arguments", {})
    call_id = call.get("id") if isinstance(call.get("id"), str) else f"call_{len(call_ids)}_{name}"
    call_ids[name] = call_id
    text = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def carry(body: Mapping[str, Any], internal: dict[str, Any]) -> None:
    """The native fields an Ollama request carries into the internal form as they are."""
    for key in PASSED:
        if body.get(key) is not None:
            internal[key] = body[key]


def native_calls(calls: Any) -> list[dict[str, Any]]:
    """OpenAI tool calls as an answer's native ones (arguments a model broke: an empty object)."""
    out = []
    for call in calls or ():
        function = call.get("function") or {}
        try:
            arguments = call_arguments(function.get("arguments"))
        except ValueError:  # a model's broken arguments: the client gets an empty object
            arguments = {}
        out.append(native_function(function.get("name", ""), arguments))
    return out


def counts(usage: Any) -> dict[str, int]:
    """An OpenAI usage as Ollama's counts (``usage_of``: the other way)."""
    if not isinstance(usage, dict):
        return {}
    named = (("prompt_eval_count", "prompt_tokens"), ("eval_count", "completion_tokens"))
    return {ours: usage[theirs] for ours, theirs in named if isinstance(usage.get(theirs), int)}


def generate_answer(chat: Mapping[str, Any], model: Any) -> dict[str, Any]:
    """A worker's ``/api/chat`` answer or line as ``/api/generate`` writes it: the message's text as
    ``response`` (and its ``thinking``), every other field (``done``, ``done_reason``, the durations and
    counts) as it came; generate has no tools, so no ``tool_calls``."""
    message = chat.get("message")
    message = message if isinstance(message, Mapping) else {}
    out: dict[str, Any] = {"model": model, "created_at": chat.get("created_at")}
    out["response"] = message.get("content") or ""
    if message.get("thinking"):
        out["thinking"] = message["thinking"]
    out.update((key, value) for key, value in chat.items() if key not in _CHAT_ONLY)
    return out


_CHAT_ONLY = frozenset(("model", "created_at", "message"))


def renamed(chunk: RelayedChunk, model: Any) -> bytes:
    """A worker's line with ``model`` in place of its own: Ollama writes ``"model"`` first, so only that
    prefix is rewritten (the rest of the line is sent as its bytes came); any other line is written anew."""
    raw, named = chunk.raw, chunk.native.get("model")
    if isinstance(named, str):
        head = b'{"model":' + orjson.dumps(named) + b","
        if raw.startswith(head):
            return b'{"model":' + orjson.dumps(model) + b"," + raw[len(head) :] + b"\n"
    return orjson.dumps({**chunk.native, "model": model}) + b"\n"


def chat_answer(result: Mapping[str, Any], model: Any) -> dict[str, Any]:
    """An internal (OpenAI-shaped) chat answer as ``/api/chat`` writes it."""
    choice = first_choice(result)
    message = choice.get("message") or {}
    native: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    thinking = reasoning(message)
    if thinking:
        native["thinking"] = thinking
    if message.get("tool_calls"):
        native["tool_calls"] = native_calls(message["tool_calls"])
    return {
        "model": model,
        "created_at": now(),
        "message": native,
        "done": True,
        "done_reason": DONE_REASONS.get(choice.get("finish_reason") or "stop", "stop"),
        **counts(result.get("usage")),
    }


class NDJSONLines(StreamRender):
    """Chat (``message``) or generate (``response``) lines; tool calls are sent whole in the last line."""

    __slots__ = ("_calls", "_finish", "_generate", "_model", "_relayed", "_usage")
    headers = NDJSON_HEADERS

    def __init__(self, model: str | None, generate: bool) -> None:
        self._model = model
        self._relayed = False
        self._generate = generate
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: Any = None

    def _line(self, content: str, thinking: str | None, **extra: Any) -> bytes:
        line: dict[str, Any] = {"model": self._model, "created_at": now()}
        if self._generate:  # no tools on generate: Ollama never sends `tool_calls` there
            extra.pop("tool_calls", None)
            line["response"] = content
            if thinking:
                line["thinking"] = thinking
        else:
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if thinking:
                message["thinking"] = thinking
            if extra.pop("tool_calls", None):
                message["tool_calls"] = native_calls(self._calls[i] for i in sorted(self._calls))
            line["message"] = message
        line.update(extra)
        return orjson.dumps(line) + b"\n"

    def keepalive(self) -> bytes:
        """NDJSON has no comment: a line of the answer with nothing in it (``content: ""``, ``done:
        false``), as Ollama itself sends between tokens that carry no text; its clients append nothing."""
        return self._line("", None, done=False)

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        if type(chunk) is RelayedChunk:  # a worker's own line: as it came, but for the model's name
            self._relayed = True
            if self._generate:  # its /api/chat line, as /api/generate writes it
                return orjson.dumps(generate_answer(chunk.native, self._model)) + b"\n"
            return renamed(chunk, self._model)
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        choices = chunk.get("choices")
        if not choices:
            return b""
        choice = choices[0]
        if choice.get("finish_reason"):
            self._finish = choice["finish_reason"]
        delta = choice.get("delta") or {}
        for call in delta.get("tool_calls") or ():
            slot = self._calls.setdefault(call.get("index", 0), {"function": {"name": "", "arguments": ""}})
            function = call.get("function") or {}
            slot["function"]["name"] += function.get("name") or ""
            slot["function"]["arguments"] += function.get("arguments") or ""
        content, thinking = delta.get("content") or "", reasoning(delta)
        if not content and not thinking:
            return b""
        return self._line(content, thinking, done=False)

    def end(self) -> bytes:
        if self._relayed:  # the worker's own last line went by
            return b""
        reason = DONE_REASONS.get(self._finish or "stop", "stop")
        return self._line(
            "", None, tool_calls=bool(self._calls), done=True, done_reason=reason, **counts(self._usage)
        )

    def error(self, message: str) -> bytes:
        return error_body(message) + b"\n"
