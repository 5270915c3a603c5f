"""The OpenAI Responses surface: ``POST /v1/responses``, stateless.

What it does, below; how, in ``wire.openai_responses`` (the request's translation, the answer, the
event stream) and ``wire.openai_chat`` (the error body): this module only picks them per request.

A Responses request becomes the internal (OpenAI Chat-shaped) form: ``instructions`` -> a system
message; ``input`` as text -> one user message, as items -> messages (``input_text``/``output_text``
parts -> text, ``input_image`` -> an image part), ``function_call`` items -> an assistant's
``tool_calls`` (consecutive calls joined), ``function_call_output`` -> ``tool`` messages; ``reasoning``
items are not sent on (they are the provider's hidden state); function ``tools`` (flat) -> Chat's nested
tools, ``namespace`` groups flattened into their function tools (a call of one is answered with its
``namespace``); hosted tools (``web_search``, ``local_shell``, ``custom``, ...) and their call items are
left out and named in ``X-Interlock-Dropped`` (no chat upstream can run them), as is every request field
the internal form does not carry; ``max_output_tokens`` -> ``max_tokens``; ``reasoning.effort`` ->
``reasoning_effort``; ``text.format`` json_schema/json_object -> ``response_format``.
``previous_response_id`` is answered with a 400: the gateway stores no responses (send the whole
conversation as ``input`` items).

Answers are ``response`` objects (``output``: a ``reasoning`` item whose summary is the upstream's
thinking text when there is one, a ``message`` with ``output_text``, ``function_call`` items;
``status`` ``incomplete`` when the output limit was hit). Streams are typed SSE events
(``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.reasoning_summary_part.added``, ``response.reasoning_summary_text.delta``/``.done``,
``response.content_part.added``, ``response.output_text.delta``/``.done``,
``response.function_call_arguments.delta``/``.done``, ``response.output_item.done``,
``response.completed``), each with a ``sequence_number``; a stream broken after it started ends with
an ``error`` event and no ``response.completed``. Errors are OpenAI's ``{"error": {...}}``.
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
