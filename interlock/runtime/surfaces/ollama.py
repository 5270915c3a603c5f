"""The Ollama native surface: ``/api/chat``, ``/api/generate``, ``/api/embed`` (``/api/embeddings``); the
listing endpoints (``/api/tags``, ``/api/show``, ``/api/ps``, ``/api/version``, ``/``) are plain handlers,
``request.listing``.

How, in ``wire.ollama_caller`` (the request into the internal form, the answer, the NDJSON lines, the
error body; field by field in docs/surfaces.md): this module only picks them per request. ``stream``
defaults to true, as in Ollama. Model names are the plan's aliases (``mana/long-form``) and, with direct
models allowed, its ``provider/model`` candidates; the answer's ``model`` is the name the caller gave
(the candidate that answered is in ``X-Interlock-Resolved``). Durations are not reported (the gateway
does not see the worker's load/eval split); counts are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from interlock.runtime.base.asgi import json_type
from interlock.runtime.base.errors import InvalidRequest
from interlock.runtime.surfaces.base import (
    Failure,
    Parsed,
    StreamRender,
    Surface,
    chat_request,
    check_model,
    check_output_limits,
)
from interlock.runtime.wire import ollama_caller as wire
from interlock.runtime.wire.base import Native, Relayed
from interlock.runtime.wire.fields import OUTPUT_LIMITS


def _stream_flag(body: Mapping[str, Any]) -> bool:
    stream = body.get("stream", True)
    if stream is None:
        return True
    if not isinstance(stream, bool):
        raise InvalidRequest(f"`stream` must be a boolean, not {json_type(stream)}")
    return stream


class _Native(Surface):
    name = "ollama"
    route = "api/chat"

    def error(self, failure: Failure) -> bytes:
        return wire.error_body(failure.message)

    def stream(self, parsed: Parsed, candidate: str) -> StreamRender:
        return wire.NDJSONLines(parsed.echo, isinstance(self, Generate))


class Chat(_Native):
    """``POST /api/chat``."""

    limits = OUTPUT_LIMITS["ollama"]
    unbounded = frozenset({-1, -2})  # Ollama's "no limit" and "fill the context"

    def parse(self, body: dict[str, Any]) -> Parsed:
        # to a worker: as it came (``wire.ollama.relayed_request``)
        return self._chat(body, Native("ollama", body))

    def _chat(self, body: dict[str, Any], native: Native | None) -> Parsed:
        model = check_model(body)
        check_output_limits(body, self.limits, self.unbounded)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InvalidRequest("`messages` must be a non-empty array")
        call_ids: dict[str, str] = {}
        internal: dict[str, Any] = {
            "model": model,
            "messages": [wire.internal_message(i, m, call_ids) for i, m in enumerate(messages)],
        }
        wire.carry(body, internal)
        return chat_request(model, _stream_flag(body), internal, native=native)

    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        if type(result) is Relayed:  # a worker's own answer: as it came, but for the model's name
            return orjson.dumps({**result.native, "model": parsed.echo})
        return orjson.dumps(wire.chat_answer(result, parsed.echo))


GENERATE_ONLY = frozenset(("prompt", "system", "images", "raw", "template", "context", "suffix", "tools"))


class Generate(Chat):
    """``POST /api/generate``: ``system`` + ``prompt`` (+ ``images``) as a two-message chat."""

    route = "api/generate"

    def parse(self, body: dict[str, Any]) -> Parsed:
        check_model(body)
        for key in ("raw", "template", "context", "suffix"):
            if body.get(key):
                raise InvalidRequest(
                    f"`{key}` is not supported by this gateway's /api/generate; use /api/chat"
                )
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise InvalidRequest("`prompt` must be a non-empty string")
        messages: list[Any] = []
        if isinstance(body.get("system"), str) and body["system"]:
            messages.append({"role": "system", "content": body["system"]})
        user: dict[str, Any] = {"role": "user", "content": prompt}
        if body.get("images") is not None:
            user["images"] = body["images"]
        messages.append(user)
        # an Ollama worker gets it as the chat Ollama itself makes of it (its answer's durations and
        # counts come back whole); any other worker, the translated request
        chat = {key: value for key, value in body.items() if key not in GENERATE_ONLY}
        chat["messages"] = messages
        return self._chat({**chat, "tools": None}, Native("ollama", chat))

    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        if type(result) is Relayed:  # a worker's own /api/chat answer, as /api/generate writes it
            return orjson.dumps(wire.generate_answer(result.native, parsed.echo))
        return orjson.dumps(wire.generate_answer(wire.chat_answer(result, parsed.echo), parsed.echo))


class Embed(_Native):
    """``POST /api/embed``: ``input`` a string or strings -> ``embeddings``."""

    operation = "embeddings"
    route = "api/embed"

    def parse(self, body: dict[str, Any]) -> Parsed:
        model = check_model(body)
        data = body.get("input")
        if isinstance(data, list) and data and all(isinstance(item, str) for item in data):
            pass
        elif not isinstance(data, str):
            raise InvalidRequest("`input` must be a string or a non-empty array of strings")
        internal: dict[str, Any] = {"model": model, "input": data}
        for key in ("dimensions", "keep_alive"):
            if body.get(key) is not None:
                internal[key] = body[key]
        return Parsed("embeddings", model, False, internal, model)

    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        vectors = [item.get("embedding") for item in sorted(result.get("data") or (), key=_index)]
        answer: dict[str, Any] = {"model": parsed.echo, "embeddings": vectors}
        usage = result.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            answer["prompt_eval_count"] = usage["prompt_tokens"]
        return orjson.dumps(answer)


def _index(item: Any) -> int:
    return item.get("index", 0) if isinstance(item, dict) else 0


class LegacyEmbeddings(Embed):
    """``POST /api/embeddings``: one ``prompt`` -> one ``embedding``."""

    route = "api/embeddings"

    def parse(self, body: dict[str, Any]) -> Parsed:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise InvalidRequest("`prompt` must be a string")
        return super().parse({**body, "input": prompt})

    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        data = result.get("data") or [{}]
        return orjson.dumps({"embedding": data[0].get("embedding") or []})
