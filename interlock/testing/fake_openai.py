"""A fake OpenAI-compatible upstream: /v1/models, /v1/chat/completions (JSON and SSE), /v1/embeddings.

Shapes follow docs/wire-formats.md. With ``api_key`` set, every route demands exactly
``Authorization: Bearer <api_key>`` and answers 401 otherwise; that 401 echoes the key it received,
as a careless upstream might, so tests can prove the gateway never passes such text on unredacted.

Run it out of process: ``python -m interlock.testing.fake_openai --port 0`` prints its URL first.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

import orjson

from interlock.testing.replies import (
    Reply,
    count_words,
    embedding_base64,
    embedding_for,
    first_tool_name,
    last_is_tool_result,
    split_text,
)
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


class FakeOpenAI(FakeServer):
    """An OpenAI-compatible upstream on loopback; ``base_url`` is what a client is configured with."""

    kind = "fake-openai"

    def __init__(
        self,
        *,
        name: str | None = None,
        api_key: str | None = None,
        models: Sequence[str] | None = None,
        reply: Reply | None = None,
        embedding_dimensions: int = 8,
        record: bool = True,
        port: int = 0,
    ) -> None:
        """``models=None`` accepts any model name (and lists ``fake-model``); a list is enforced (404)."""
        super().__init__(name=name, reply=reply, record=record, port=port)
        self.api_key = api_key
        self.models = tuple(models) if models is not None else None
        self.embedding_dimensions = embedding_dimensions

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/v1/models"): self._models,
            ("POST", "/v1/chat/completions"): self._chat,
            ("POST", "/v1/embeddings"): self._embeddings,
        }

    def error_body(self, status: int, message: str) -> bytes:
        kind = {401: "invalid_request_error", 429: "rate_limit_error"}.get(status)
        kind = kind or ("server_error" if status >= 500 else "invalid_request_error")
        return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}})

    def malformed_frame(self) -> bytes:
        return b'data: {"id": "chatcmpl-broken", "choices": [\n\n'

    def error_frame(self, message: str) -> bytes:
        error = {"message": message, "type": "server_error", "param": None, "code": None}
        return b"data: " + orjson.dumps({"error": error}) + b"\n\n"

    # ----- routes -----

    def _refused(self, incoming: Incoming) -> ErrorAnswer | None:
        if self.api_key is None:
            return None
        sent = incoming.headers.get("authorization", "")
        if sent == f"Bearer {self.api_key}":
            return None
        shown = sent.removeprefix("Bearer ") or "(none)"
        return ErrorAnswer(401, f"Incorrect API key provided: {shown}.")

    def _unknown_model(self, model: str | None) -> ErrorAnswer | None:
        if model is None:
            return ErrorAnswer(400, "you must provide a model parameter")
        if self.models is not None and model not in self.models:
            return ErrorAnswer(404, f"The model `{model}` does not exist or you do not have access to it.")
        return None

    def _models(self, incoming: Incoming) -> Answer:
        refused = self._refused(incoming)
        if refused is not None:
            return refused
        names = self.models if self.models is not None else ("fake-model",)
        data = [{"id": n, "object": "model", "created": 1700000000, "owned_by": self.name} for n in names]
        return JsonAnswer({"object": "list", "data": data})

    def _chat(self, incoming: Incoming) -> Answer:
        error = self._refused(incoming) or self._unknown_model(incoming.model)
        if error is not None:
            return error
        body: dict[str, Any] = incoming.body
        model = incoming.model or ""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return ErrorAnswer(400, "messages must be a non-empty array")
        reply = self.reply
        tool = first_tool_name(body.get("tools")) if body.get("tool_choice") != "none" else None
        if tool is not None and last_is_tool_result(messages):
            tool = None
        pieces = split_text(reply.render(self.name, model), reply.chunks)
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        finish = "stop"
        if isinstance(limit, int) and 0 < limit < len(pieces):
            pieces, finish = pieces[:limit], "length"
        arguments = orjson.dumps(dict(reply.tool_arguments)).decode()
        prompt_tokens = count_words(messages)
        completion_tokens = 1 if tool is not None else len(pieces)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        completion_id = f"chatcmpl-{random.getrandbits(64):016x}"
        created = int(time.time())
        call_id = f"call_{random.getrandbits(64):016x}"
        if body.get("stream") is True:
            head = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
            }
            frames = [_event(head, {"role": "assistant", "content": ""}, None)]
            if tool is not None:
                start = {
                    "index": 0,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": tool, "arguments": ""},
                }
                frames.append(_event(head, {"tool_calls": [start]}, None))
                for part in split_text(arguments, 2):
                    frames.append(
                        _event(head, {"tool_calls": [{"index": 0, "function": {"arguments": part}}]}, None)
                    )
                frames.append(_event(head, {}, "tool_calls"))
            else:
                frames.extend(_event(head, {"content": piece}, None) for piece in pieces)
                frames.append(_event(head, {}, finish))
            options = body.get("stream_options")
            if isinstance(options, dict) and options.get("include_usage") is True:
                frames.append(b"data: " + orjson.dumps({**head, "choices": [], "usage": usage}) + b"\n\n")
            return StreamAnswer(_SSE, frames, b"data: [DONE]\n\n")
        message: dict[str, Any]
        if tool is not None:
            call = {"id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}
            message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        else:
            message = {"role": "assistant", "content": "".join(pieces)}
        return JsonAnswer(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        )

    def _embeddings(self, incoming: Incoming) -> Answer:
        error = self._refused(incoming) or self._unknown_model(incoming.model)
        if error is not None:
            return error
        body: dict[str, Any] = incoming.body
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return ErrorAnswer(400, "input must be a string or an array of strings")
        dimensions = body.get("dimensions")
        size = dimensions if isinstance(dimensions, int) and dimensions > 0 else self.embedding_dimensions
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = embedding_for(text, size)
            encoded: Any = embedding_base64(vector) if as_base64 else vector
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(len(t.split()) for t in texts)
        return JsonAnswer(
            {
                "object": "list",
                "data": data,
                "model": incoming.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


def _event(head: dict[str, Any], delta: dict[str, Any], finish: str | None) -> bytes:
    chunk = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def main(argv: Sequence[str] | None = None) -> None:
    from interlock.testing.cli import run_fake

    def build(args: Any) -> FakeServer:
        models = args.models.split(",") if args.models else None
        return FakeOpenAI(
            name=args.name,
            api_key=args.api_key,
            models=models,
            reply=args.reply,
            record=not args.no_record,
            port=args.port,
        )

    run_fake("fake_openai", build, argv, extra=_extra_args)


def _extra_args(parser: Any) -> None:
    parser.add_argument("--api-key", default=None, help="demand `Authorization: Bearer <key>`")
    parser.add_argument("--models", default=None, help="comma-separated model names to accept (default: any)")


if __name__ == "__main__":
    main()
