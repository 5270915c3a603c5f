"""The OpenAI Chat Completions and Embeddings surface: request checks; answers, streams and errors in
``wire.openai_chat``'s shapes.

Only what routing needs is checked (model, stream, messages/input and their types); the dict is the
internal form already and passes on unchanged. Every error uses OpenAI's shape
``{"error": {"message", "type", "param", "code"}}``. A stream ends with ``data: [DONE]``, or, when it
breaks after it started, with one SSE error event and no ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import orjson

from interlock.runtime.base.asgi import Header, json_type
from interlock.runtime.base.errors import InvalidRequest
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.surfaces.base import (
    CHAT_LIMITS,
    Failure,
    Parsed,
    Surface,
    check_model,
    check_output_limits,
    check_stream,
    failure_of,
    openai_error,
)
from interlock.runtime.wire.base import Native, StreamRender
from interlock.runtime.wire.openai_chat import NO_EXTRAS, ChunkEvents

_USAGE_ASKED = MappingProxyType({"usage_asked": True})  # a Chat stream's ``extras``


def describe_error(exc: BaseException, plan: RuntimePlan) -> tuple[int, bytes, list[Header]]:
    """Status, OpenAI-shaped body and extra headers for anything a request can end with."""
    failure = failure_of(exc, plan)
    return failure.status, openai_error(failure), failure.headers


# -- request checks --------------------------------------------------------------------------------


def check_chat(body: Mapping[str, Any]) -> tuple[str | None, bool]:
    """``(model, stream)`` of a chat request whose routing-relevant fields have the right types."""
    model = check_model(body)
    messages = body.get("messages")
    if messages is None:
        raise InvalidRequest("`messages` is required", param="messages")
    if not isinstance(messages, list):
        raise InvalidRequest(f"`messages` must be an array, not {json_type(messages)}", param="messages")
    if not messages:
        raise InvalidRequest("`messages` must hold at least one message", param="messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidRequest(
                f"`messages[{index}]` must be an object, not {json_type(message)}",
                param=f"messages[{index}]",
            )
        if not isinstance(message.get("role"), str):
            raise InvalidRequest(
                f"`messages[{index}].role` must be a string", param=f"messages[{index}].role"
            )
    stream = body.get("stream")
    if stream is None or stream is False:  # inlined check_stream: the hot path
        return model, False
    return model, check_stream(body)


def check_embeddings(body: Mapping[str, Any]) -> str | None:
    model = check_model(body)
    data = body.get("input")
    if data is None:
        raise InvalidRequest("`input` is required", param="input")
    if isinstance(data, str):
        return model
    if not isinstance(data, list) or not data:
        raise InvalidRequest("`input` must be a string or a non-empty array", param="input")
    return model


# -- the surfaces ----------------------------------------------------------------------------------


class ChatCompletions(Surface):
    """``POST /v1/chat/completions``: the internal form itself; to an OpenAI-compatible upstream it goes
    with the ``OpenAI-Beta`` header it came with (its ``Native`` form carries the header)."""

    forwards = frozenset({b"openai-beta"})
    limits = CHAT_LIMITS

    def parse(self, body: dict[str, Any]) -> Parsed:
        model, stream = check_chat(body)
        check_output_limits(body, self.limits, self.unbounded)
        native = Native("openai", body)
        if not stream:  # ``extras`` given: its default's factory is a call per request
            return Parsed("chat", model, stream, body, model, extras=NO_EXTRAS, native=native)
        options = body.get("stream_options")
        if options is None:
            options = {}
        elif type(options) is not dict or options.get("include_usage") is True:
            # as asked (a bad value: the upstream says so)
            return Parsed("chat", model, stream, body, model, extras=_USAGE_ASKED, native=native)
        # the usage ledger counts a stream by its usage chunk: ask for it, and keep it from the caller
        body["stream_options"] = {**options, "include_usage": True}
        return Parsed("chat", model, stream, body, model, native=native)

    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        result["model"] = candidate
        return orjson.dumps(result)

    def stream(self, parsed: Parsed, candidate: str) -> StreamRender:
        return ChunkEvents(candidate, parsed.extras.get("usage_asked") is True)

    def error(self, failure: Failure) -> bytes:
        return openai_error(failure)


class Embeddings(ChatCompletions):
    """``POST /v1/embeddings``."""

    operation = "embeddings"
    route = "embeddings"
    forwards = frozenset()

    def parse(self, body: dict[str, Any]) -> Parsed:
        model = check_embeddings(body)
        return Parsed("embeddings", model, False, body, model)
