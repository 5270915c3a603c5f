"""Anthropic Messages, the caller's side: an answer as ``content`` blocks and a stream as Anthropic's event
sequence (``Events``: ``message_start``, ``content_block_start``/``_delta``/``_stop`` per block,
``message_delta`` with the stop reason and output tokens, ``message_stop``; a stream broken after it
started ends with an ``error`` event), what the surface picks per request (its request:
``anthropic_request``; the upstream side, for the adapter: ``wire.anthropic``). Errors are
``{"type":"error","error":{"type","message"}}``, the type by status (``ERROR_TYPES``: the one table, read
the other way for an upstream's error event). The rules both sides share live here (image sources <->
URLs, a tool call as a ``tool_use`` block).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import orjson

from interlock.runtime.base.asgi import Header
from interlock.runtime.base.errors import CannotServe
from interlock.runtime.wire.openai_chat import (
    TranslatedEvents,
    cached_tokens,
    call_arguments,
    first_choice,
    reasoning,
)
from interlock.runtime.wire.sse import SSE_HEADERS, frame

PING = frame("ping", b'{"type": "ping"}')  # Anthropic's keepalive event, as its API sends it
ERROR_TYPES = {  # an HTTP status -> Anthropic's error type (an unlisted one: by its class, _error_type)
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def _error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def error_body(status: int, message: str, code: str | None = None, gateway_code: str | None = None) -> bytes:
    """Anthropic's error body for an answer of ``status``; an upstream's own error ``code`` (and interlock's
    class beside it) as extra keys of its ``error``, which Anthropic's shape has no place for."""
    error = {"type": _error_type(status), "message": message}
    if gateway_code is not None and code is not None:
        error["code"], error["interlock_code"] = code, gateway_code
    return orjson.dumps({"type": "error", "error": error})


def source_url(source: Any) -> str | None:
    """The URL of an image block's ``source`` (a ``data:`` URL for base64 data), or None when it is
    neither a base64 nor a url source."""
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "base64":
        return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return str(source["url"])
    return None


def url_source(url: str) -> dict[str, Any]:
    """The image block ``source`` for ``url``: base64 for a ``data:`` URL, else a url source."""
    if url.startswith("data:"):
        head, _, data = url.partition(",")
        media = head[5:].split(";")[0] or "image/png"
        return {"type": "base64", "media_type": media, "data": data}
    return {"type": "url", "url": url}


def text_of(content: Any) -> str:
    """The text of a string or of the ``text`` blocks (or parts) of a list, joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            text
            for p in content
            if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(text := p.get("text"), str)
        )
    return ""


def openai_call(block: Mapping[str, Any]) -> dict[str, Any]:
    """A ``tool_use`` block as an OpenAI tool call (its ``input`` as a JSON string)."""
    function = {"name": block.get("name", ""), "arguments": orjson.dumps(block.get("input") or {}).decode()}
    return {"id": block.get("id", ""), "type": "function", "function": function}


STOP_REASONS = {  # OpenAI's finish_reason -> Anthropic's stop_reason
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}


def message_id() -> str:
    return f"msg_{random.getrandbits(96):024x}"


def tool_use(call: Mapping[str, Any], number: int, *, strict: bool) -> dict[str, Any]:
    """An OpenAI tool call as a ``tool_use`` block, its JSON ``arguments`` as the ``input`` object. Not
    JSON: ``strict`` (a request for an Anthropic upstream) raises CannotServe, else (a model's broken
    arguments, for a Messages client) the input is empty."""
    function = call.get("function") or {}
    try:
        arguments = call_arguments(function.get("arguments"))
    except ValueError:
        if strict:
            raise CannotServe(
                "a tool call's arguments are not JSON; Anthropic takes objects", param="messages"
            ) from None
        arguments = {}
    return {
        "type": "tool_use",
        "id": call.get("id") or f"toolu_{number}",
        "name": function.get("name", ""),
        "input": arguments,
    }


def usage_of(usage: Any) -> dict[str, int]:
    """Anthropic's usage for OpenAI's: the cached part of the prompt is ``cache_read_input_tokens``,
    not counted again in ``input_tokens`` (Anthropic counts them apart, OpenAI in the prompt)."""
    usage = usage if isinstance(usage, Mapping) else {}
    cached = cached_tokens(usage)
    out = {
        "input_tokens": (usage.get("prompt_tokens") or 0) - cached,
        "output_tokens": usage.get("completion_tokens") or 0,
    }
    if cached:
        out["cache_read_input_tokens"] = cached
    return out


def answer_of(result: Mapping[str, Any], model: Any) -> dict[str, Any]:
    """A ``chat.completion`` as a Messages answer naming ``model``."""
    choice = first_choice(result)
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    thinking = reasoning(message)
    if thinking:
        content.append({"type": "thinking", "thinking": thinking, "signature": ""})
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or ():
        content.append(tool_use(call, len(content), strict=False))
    return {
        "id": message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": STOP_REASONS.get(choice.get("finish_reason") or "stop", "end_turn"),
        "stop_sequence": None,
        "usage": usage_of(result.get("usage")),
    }


# -- the client side's stream: OpenAI chunks as Anthropic's events ---------------------------------


def _event(name: str, data: dict[str, Any]) -> bytes:
    return frame(name, orjson.dumps(data))


class Events(TranslatedEvents):
    """Anthropic's event sequence from OpenAI chunks: one open block at a time (thinking, text, a tool);
    or, from a Messages upstream that got the caller's own request, its events as they came (the model
    named in ``message_start`` replaced by the caller's)."""

    __slots__ = ("_block", "_index")
    headers: tuple[Header, ...] = SSE_HEADERS

    def __init__(self, model: str | None) -> None:
        super().__init__(model)
        self._block: tuple[str, int] | None = None  # (kind, the OpenAI tool-call index) of the open block
        self._index = -1

    def keepalive(self) -> bytes:
        """Anthropic's own ``ping`` event, which its SDKs (and Claude Code) read past; sent before
        ``message_start`` too, which names the model that answers and is not known yet."""
        return PING

    def _open(self, kind: str, call: int, block: dict[str, Any], out: list[bytes]) -> None:
        if self._block == (kind, call):
            return
        self._close(out)
        self._index += 1
        self._block = (kind, call)
        out.append(
            _event(
                "content_block_start",
                {"type": "content_block_start", "index": self._index, "content_block": block},
            )
        )

    def _close(self, out: list[bytes]) -> None:
        if self._block is not None:
            out.append(_event("content_block_stop", {"type": "content_block_stop", "index": self._index}))
            self._block = None

    def _delta(self, delta: dict[str, Any], out: list[bytes]) -> None:
        out.append(
            _event(
                "content_block_delta", {"type": "content_block_delta", "index": self._index, "delta": delta}
            )
        )

    def _relay(self, event: dict[str, Any], raw: bytes) -> bytes:
        kind = event.get("type")
        if kind == "message_start" and isinstance(message := event.get("message"), dict):
            raw = orjson.dumps({**event, "message": {**message, "model": self._model}})
        return frame(str(kind), raw)

    def _start(self, out: list[bytes]) -> None:
        message: dict[str, Any] = {
            "id": message_id(),
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.prompt_tokens, "output_tokens": 0},
        }
        out.append(_event("message_start", {"type": "message_start", "message": message}))

    def _translate(self, delta: dict[str, Any], out: list[bytes]) -> None:
        thinking = reasoning(delta)
        if thinking:
            self._open("thinking", -1, {"type": "thinking", "thinking": "", "signature": ""}, out)
            self._delta({"type": "thinking_delta", "thinking": thinking}, out)
        if delta.get("content"):
            self._open("text", -1, {"type": "text", "text": ""}, out)
            self._delta({"type": "text_delta", "text": delta["content"]}, out)
        for call in delta.get("tool_calls") or ():
            function = call.get("function") or {}
            number = call.get("index", 0)
            if self._block != ("tool", number):
                block: dict[str, Any] = {
                    "type": "tool_use",
                    "id": call.get("id") or f"toolu_{number}",
                    "name": function.get("name") or "",
                    "input": {},
                }
                self._open("tool", number, block, out)
            if function.get("arguments"):
                self._delta({"type": "input_json_delta", "partial_json": function["arguments"]}, out)

    def _end(self, out: list[bytes]) -> None:
        usage = usage_of(self._usage)
        delta = {
            "stop_reason": STOP_REASONS.get(self._finish or "stop", "end_turn"),
            "stop_sequence": None,
        }
        out.append(_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
        out.append(_event("message_stop", {"type": "message_stop"}))

    def error(self, message: str) -> bytes:
        return _event("error", {"type": "error", "error": {"type": "api_error", "message": message}})


# -- the upstream side: an internal request as a Messages request, its answer and events as OpenAI's --
