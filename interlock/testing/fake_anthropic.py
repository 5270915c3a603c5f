"""A fake Anthropic upstream: /v1/models and /v1/messages (JSON and the SSE event sequence).

It demands ``anthropic-version`` on every request (400 without it) and, with ``api_key`` set, exactly
``x-api-key: <api_key>`` (401 otherwise, echoing what it got, as a careless upstream might). A request
without ``max_tokens`` answers 400, as Anthropic does. When the request offers tools and the last user
turn is not a tool result, it calls the first tool with ``Reply.tool_arguments``. Faults come from
``FakeServer`` (``Fault.http_status(529)`` is Anthropic's overloaded answer).
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from interlock.testing.replies import Reply, count_words, split_text
from interlock.testing.server import (
    Answer,
    ErrorAnswer,
    FakeServer,
    Incoming,
    JsonAnswer,
    Route,
    StreamAnswer,
)

_SSE = "text/event-stream"
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: %b\ndata: %b\n\n" % (name.encode(), orjson.dumps({"type": name, **data}))


def _answered_tool(messages: Any) -> bool:
    last = messages[-1] if isinstance(messages, list) and messages else None
    content = last.get("content") if isinstance(last, dict) else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


class FakeAnthropic(FakeServer):
    """An Anthropic Messages upstream on loopback; ``base_url`` is what a provider is configured with."""

    kind = "fake-anthropic"

    def __init__(
        self,
        *,
        name: str | None = None,
        api_key: str | None = None,
        reply: Reply | None = None,
        record: bool = True,
        port: int = 0,
    ) -> None:
        super().__init__(name=name, reply=reply, record=record, port=port)
        self.api_key = api_key

    @property
    def base_url(self) -> str:
        return self.url

    def routes(self) -> dict[tuple[str, str], Route]:
        return {("GET", "/v1/models"): self._models, ("POST", "/v1/messages"): self._messages}

    def error_body(self, status: int, message: str) -> bytes:
        kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})

    def malformed_frame(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type": "content_block_delta", "delta": [\n\n'

    def error_frame(self, message: str) -> bytes:
        return _event("error", {"error": {"type": "overloaded_error", "message": message}})

    def _refused(self, incoming: Incoming) -> ErrorAnswer | None:
        if not incoming.headers.get("anthropic-version"):
            return ErrorAnswer(400, "anthropic-version: header is required")
        if self.api_key is None:
            return None
        sent = incoming.headers.get("x-api-key", "")
        if sent == self.api_key:
            return None
        return ErrorAnswer(401, f"invalid x-api-key: {sent or '(none)'}")

    def _models(self, incoming: Incoming) -> Answer:
        refused = self._refused(incoming)
        if refused is not None:
            return refused
        return JsonAnswer({"data": [{"type": "model", "id": "claude-fake", "display_name": "Claude (fake)"}]})

    def _messages(self, incoming: Incoming) -> Answer:
        refused = self._refused(incoming)
        if refused is not None:
            return refused
        body: Any = incoming.body
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return ErrorAnswer(400, "messages: field required")
        if not isinstance(body.get("max_tokens"), int):
            return ErrorAnswer(400, "max_tokens: field required")
        model = incoming.model or ""
        messages = body["messages"]
        tools = body.get("tools") or []
        tool = tools[0].get("name") if tools and not _answered_tool(messages) else None
        pieces = split_text(self.reply.render(self.name, model), self.reply.chunks)
        finish = "end_turn"
        if 0 < body["max_tokens"] < len(pieces):
            pieces, finish = pieces[: body["max_tokens"]], "max_tokens"
        usage = {"input_tokens": count_words(messages), "output_tokens": 1 if tool else len(pieces)}
        message_id = f"msg_{random.getrandbits(64):016x}"
        call_id = f"toolu_{random.getrandbits(64):016x}"
        arguments = dict(self.reply.tool_arguments)
        if body.get("stream") is True:
            head = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": []}
            start_usage = {"input_tokens": usage["input_tokens"], "output_tokens": 1}
            frames = [
                _event("message_start", {"message": {**head, "stop_reason": None, "usage": start_usage}})
            ]
            if tool is not None:
                block = {"type": "tool_use", "id": call_id, "name": tool, "input": {}}
                frames.append(_event("content_block_start", {"index": 0, "content_block": block}))
                for part in split_text(orjson.dumps(arguments).decode(), 2):
                    delta = {"type": "input_json_delta", "partial_json": part}
                    frames.append(_event("content_block_delta", {"index": 0, "delta": delta}))
                finish = "tool_use"
            else:
                block = {"type": "text", "text": ""}
                frames.append(_event("content_block_start", {"index": 0, "content_block": block}))
                frames.extend(
                    _event(
                        "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}}
                    )
                    for piece in pieces
                )
            frames.append(_event("content_block_stop", {"index": 0}))
            frames.append(
                _event(
                    "message_delta",
                    {"delta": {"stop_reason": finish, "stop_sequence": None}, "usage": usage},
                )
            )
            return StreamAnswer(_SSE, frames, _event("message_stop", {}))
        content: list[dict[str, Any]]
        if tool is not None:
            content = [{"type": "tool_use", "id": call_id, "name": tool, "input": arguments}]
            finish = "tool_use"
        else:
            content = [{"type": "text", "text": "".join(pieces)}]
        return JsonAnswer(
            {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": finish,
                "stop_sequence": None,
                "usage": usage,
            }
        )
