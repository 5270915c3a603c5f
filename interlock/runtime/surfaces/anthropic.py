"""The Anthropic Messages surface: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

A Messages request becomes the internal (OpenAI-shaped) form: ``system`` becomes the first message;
content blocks map one to one (``text`` -> text parts, ``image`` with a base64 or URL source -> an
``image_url`` part, an assistant's ``tool_use`` -> ``tool_calls``, a user's ``tool_result`` -> a ``tool``
message placed before the rest of that turn); ``tools`` (``input_schema``) -> function tools;
``tool_choice`` auto/any/tool/none -> auto/required/named/none; ``stop_sequences`` -> ``stop``;
``top_k`` and ``thinking`` (-> ``think``) travel as the native fields the adapters already know (an
upstream that cannot take them drops them and says so in ``X-Interlock-Dropped``); ``role: "system"``
turns inside ``messages`` stay system turns where they stand. What the internal form cannot carry
(``cache_control``, ``metadata``, ``output_config``, ``context_management``, server tools, unknown
fields) is named in ``X-Interlock-Dropped``. To an ``anthropic`` candidate none of this applies: the
request goes as it came (``Native``, with its ``anthropic-beta``/``anthropic-version`` headers) and its
answer and events come back as they came, the model name replaced.

Answers: ``content`` blocks (``thinking``, ``text``, ``tool_use`` with parsed ``input``), ``stop_reason``
(``end_turn``, ``max_tokens``, ``tool_use``), ``usage`` in/out tokens. Streams follow Anthropic's event
sequence (``message_start``, ``content_block_start``/``_delta``/``_stop`` per block, ``message_delta``
with the stop reason and output tokens, ``message_stop``); a stream broken after it started ends with an
``error`` event and no ``message_stop``. Errors: ``{"type":"error","error":{"type","message"}}``.
``x-api-key`` and ``anthropic-version`` are accepted and not checked (the gateway has no caller keys).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from interlock.runtime.access import caller_of
from interlock.runtime.asgi import (
    ClientGone,
    Header,
    Receive,
    Scope,
    Send,
    parse_object,
    read_body,
    send_json,
)
from interlock.runtime.guards.needs import needs_of
from interlock.runtime.resolve import resolve
from interlock.runtime.surfaces.base import (
    Failure,
    Parsed,
    StreamRender,
    Translated,
    Translation,
    check_model,
    failure_of,
)
from interlock.runtime.surfaces.openai import SSE_HEADERS
from interlock.runtime.wire import anthropic as wire
from interlock.runtime.wire.base import Relayed, RelayedChunk
from interlock.runtime.wire.openai_chat import reasoning

if TYPE_CHECKING:
    from interlock.runtime.services import RequestServices

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str) -> bytes:
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: %b\ndata: %b\n\n" % (name.encode(), orjson.dumps(data))


class _Events(StreamRender):
    """Anthropic's event sequence from OpenAI chunks: one open block at a time (thinking, text, a tool);
    or, from a Messages upstream that got the caller's own request, its events as they came (the model
    named in ``message_start`` replaced by the caller's)."""

    __slots__ = ("_block", "_finish", "_index", "_model", "_relayed", "_started", "_usage")
    headers: tuple[Header, ...] = SSE_HEADERS

    def __init__(self, model: str | None) -> None:
        self._model = model
        self._relayed = False
        self._started = False
        self._block: tuple[str, int] | None = None  # (kind, the OpenAI tool-call index) of the open block
        self._index = -1
        self._finish: str | None = None
        self._usage: Any = None

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

    def _relay(self, chunk: RelayedChunk) -> bytes:
        self._relayed = True
        event = chunk.native
        kind = event.get("type")
        data = chunk.raw
        if kind == "message_start" and isinstance(message := event.get("message"), dict):
            data = orjson.dumps({**event, "message": {**message, "model": self._model}})
        return b"event: %b\ndata: %b\n\n" % (str(kind).encode(), data)

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        if type(chunk) is RelayedChunk:
            return self._relay(chunk)
        out: list[bytes] = []
        if not self._started:
            self._started = True
            message: dict[str, Any] = {
                "id": wire.message_id(),
                "type": "message",
                "role": "assistant",
                "model": self._model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": self.prompt_tokens, "output_tokens": 0},
            }
            out.append(_event("message_start", {"type": "message_start", "message": message}))
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
            delta = choice.get("delta") or {}
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
        return b"".join(out)

    def end(self) -> bytes:
        if self._relayed:  # the upstream's own message_delta and message_stop went by
            return b""
        out: list[bytes] = []
        self._close(out)
        usage = wire.usage_of(self._usage)
        delta = {
            "stop_reason": wire.STOP_REASONS.get(self._finish or "stop", "end_turn"),
            "stop_sequence": None,
        }
        out.append(_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
        out.append(_event("message_stop", {"type": "message_stop"}))
        return b"".join(out)

    def error(self, message: str) -> bytes:
        return _event("error", {"type": "error", "error": {"type": "api_error", "message": message}})


class Messages(Translated):
    """``POST /v1/messages``; to a Messages upstream, the request goes as it came (``Native``) with its
    ``anthropic-beta``/``anthropic-version`` headers, and the answer comes back as it came."""

    forwards = frozenset({b"anthropic-beta", b"anthropic-version"})
    relays = "anthropic"
    limits = (("max_tokens",),)

    def translate(self, body: dict[str, Any]) -> Translation:
        return wire.internal_request(body)

    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        if type(result) is Relayed:
            return orjson.dumps({**result.native, "model": parsed.echo})
        return orjson.dumps(wire.answer_of(result, parsed.echo))

    def stream(self, parsed: Parsed, candidate: str) -> StreamRender:
        return _Events(parsed.echo)

    def error(self, failure: Failure) -> bytes:
        return error_body(failure.status, failure.message)


async def count_tokens(services: RequestServices, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/messages/count_tokens``: the gateway's own estimate (the preflight's), not a tokenizer."""
    plan = services.plan
    headers = [plan.plan_header]
    try:
        body = parse_object(await read_body(scope, receive, plan.server.max_body_bytes))
        caller = caller_of(scope)
        caller.check(resolve(plan, check_model(body), caller).label)
        internal, _, _ = wire.internal_request(body, counting=True)
        needs = needs_of(internal, "chat", plan.preflight)
    except ClientGone:
        return
    except Exception as exc:  # a refusal; anything else is a bug, logged and answered 500
        failure = failure_of(exc, plan)
        headers.extend(failure.headers)
        await send_json(send, failure.status, error_body(failure.status, failure.message), headers)
        return
    tokens = needs.prompt_tokens + needs.images * plan.preflight.image_reserve_tokens
    await send_json(send, 200, orjson.dumps({"input_tokens": tokens}), headers)
