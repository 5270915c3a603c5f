"""A fake Anthropic upstream: /v1/models, /v1/messages (JSON and the SSE event sequence) and
/v1/messages/count_tokens (``input_tokens``: ``fake_openai.tokenize`` of the system, messages and tools).

It demands ``anthropic-version`` on every request (400 without it) and, with ``api_key`` set, exactly
``x-api-key: <api_key>`` (401 otherwise, echoing what it got, as a careless upstream might). A request
without ``max_tokens`` answers 400, as Anthropic does; so does a ``role: "system"`` turn inside
``messages`` unless ``anthropic-beta`` names a beta that allows them, with Anthropic's own wording
(``Unexpected role "system"``, which Claude Code reads to retry without such turns).
``MID_CONVERSATION_BETAS``: the one each Claude Code sends with such turns (2.1.197:
``mid-conversation-system-2026-04-07``; 2.1.337: ``mid-conversation-tool-changes-2026-07-01``, which it
leaves out, with the turns, when it retries). When the
request offers tools and the last user turn is not a tool result, it calls them as ``replies.planned_calls``
says (several at once when ``Reply.tool_calls`` scripts them). Faults come from ``FakeServer``
(``Fault.http_status(529)`` is Anthropic's overloaded answer).

Run it out of process: ``python -m interlock.testing.fake_anthropic --port 0`` prints its URL first.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import orjson

from interlock.testing.fake_openai import tokenize
from interlock.testing.fake_server import (
    Answer,
    ErrorAnswer,
    FakeServer,
    Incoming,
    JsonAnswer,
    Route,
    StreamAnswer,
)
from interlock.testing.replies import Reply, answers_a_tool_use, count_words, planned_calls, split_text

_SSE = "text/event-stream"
# the betas that let `messages` hold system turns (the one each Claude Code version sends with them)
MID_CONVERSATION_BETAS = frozenset(
    {"mid-conversation-system-2026-04-07", "mid-conversation-tool-changes-2026-07-01"}
)
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: %b\ndata: %b\n\n" % (name.encode(), orjson.dumps({"type": name, **data}))


def _misplaced_system(messages: list[Any], betas: str) -> ErrorAnswer | None:
    if not MID_CONVERSATION_BETAS.isdisjoint(betas.replace(" ", "").split(",")):
        return None
    for number, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") == "system":
            return ErrorAnswer(
                400,
                f'messages.{number}: Unexpected role "system". The Messages API accepts a top-level '
                '`system` parameter, not "system" as an input message role.',
            )
    return None


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
        return {
            ("GET", "/v1/models"): self._models,
            ("POST", "/v1/messages"): self._messages,
            ("POST", "/v1/messages/count_tokens"): self._count_tokens,
        }

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

    def _count_tokens(self, incoming: Incoming) -> Answer:
        refused = self._refused(incoming)
        if refused is not None:
            return refused
        body = incoming.body if isinstance(incoming.body, dict) else {}
        counted = [body.get(k) for k in ("system", "messages", "tools")]
        return JsonAnswer({"input_tokens": tokenize(orjson.dumps(counted).decode())})

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
        misplaced = _misplaced_system(messages, incoming.headers.get("anthropic-beta", ""))
        if misplaced is not None:
            return misplaced
        choice = body.get("tool_choice")
        tools = body.get("tools") if not (isinstance(choice, dict) and choice.get("type") == "none") else None
        calls = [
            {
                "type": "tool_use",
                "id": f"toolu_{random.getrandbits(64):016x}",
                "name": name,
                "input": args,
            }
            for name, args in planned_calls(self.reply, tools, answers_a_tool_use(messages))
        ]
        pieces = split_text(self.reply.render(self.name, model), self.reply.chunks)
        finish = "end_turn"
        if 0 < body["max_tokens"] < len(pieces):
            pieces, finish = pieces[: body["max_tokens"]], "max_tokens"
        usage = {"input_tokens": count_words(messages), "output_tokens": len(calls) or len(pieces)}
        message_id = f"msg_{random.getrandbits(64):016x}"
        if body.get("stream") is True:
            head = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": []}
            start_usage = {"input_tokens": usage["input_tokens"], "output_tokens": 1}
            frames = [
                _event("message_start", {"message": {**head, "stop_reason": None, "usage": start_usage}})
            ]
            if calls:
                for index, call in enumerate(calls):
                    block = {**call, "input": {}}
                    frames.append(_event("content_block_start", {"index": index, "content_block": block}))
                    for part in split_text(orjson.dumps(call["input"]).decode(), 2):
                        delta = {"type": "input_json_delta", "partial_json": part}
                        frames.append(_event("content_block_delta", {"index": index, "delta": delta}))
                    frames.append(_event("content_block_stop", {"index": index}))
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
        if calls:
            content, finish = calls, "tool_use"
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


def main(argv: Sequence[str] | None = None) -> None:
    from interlock.testing.run_fake import run_fake

    def build(args: Any) -> FakeServer:
        return FakeAnthropic(
            name=args.name, api_key=args.api_key, reply=args.reply, record=not args.no_record, port=args.port
        )

    def extra(parser: Any) -> None:
        parser.add_argument("--api-key", default=None, help="demand `x-api-key: <key>`")

    run_fake("fake_anthropic", build, argv, extra=extra)


if __name__ == "__main__":
    main()
