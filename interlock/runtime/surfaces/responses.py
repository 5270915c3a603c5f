"""The OpenAI Responses surface: ``POST /v1/responses``, stateless (``previous_response_id`` is answered
with a 400: the gateway stores no responses; send the whole conversation as ``input`` items).

How, in ``wire.openai_responses`` (the request into the internal, Chat-shaped form; the ``response``
object; the typed SSE events, each with a ``sequence_number``) and ``wire.openai_chat`` (the error
body); field by field, and what is named in ``X-Interlock-Dropped`` (hosted tools and their items, no
chat upstream can run them), in docs/surfaces.md. This module only picks them per request. A stream
broken after it started ends with an ``error`` event and no ``response.completed``.
"""

from __future__ import annotations

from typing import Any

import orjson

from interlock.runtime.surfaces.base import Failure, Parsed, Translated, Translation, openai_error
from interlock.runtime.wire import openai_responses as wire
from interlock.runtime.wire.base import Relayed, StreamRender
from interlock.runtime.wire.fields import OUTPUT_LIMITS


class Responses(Translated):
    """``POST /v1/responses``; to an upstream declared ``responses: true``, the request goes as it came
    (``Native``, with its ``OpenAI-Beta`` header), and the answer and events come back as they came."""

    forwards = frozenset({b"openai-beta"})
    relays: str | None = "responses"  # (the base's type: mypyc refuses an override that narrows it)
    limits = OUTPUT_LIMITS["responses"]
    name = "responses"  # (one assignment a line: mypyc compiles no other in a class body)
    route = "responses"

    def translate(self, body: dict[str, Any]) -> Translation:
        return wire.internal_request(body)

    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        if type(result) is Relayed:  # a Responses upstream's own answer: as it came, but for the model
            return orjson.dumps({**result.native, "model": parsed.echo})
        return orjson.dumps(wire.answer_of(result, parsed.echo, parsed.extras.get("namespaces", {})))

    def stream(self, parsed: Parsed, candidate: str) -> StreamRender:
        return wire.Events(parsed.echo, parsed.extras.get("namespaces", {}))

    def error(self, failure: Failure) -> bytes:
        return openai_error(failure)
