"""The Anthropic Messages surface: ``POST /v1/messages`` (its ``count_tokens`` is ``request.count_tokens``).

What it does, below; how, in ``wire.anthropic_caller`` (the request's translation, the answer, the event
stream, the error body): this module only picks them per request.

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

from interlock.runtime.surfaces.base import (
    Failure,
    Parsed,
    Translated,
    Translation,
)
from interlock.runtime.wire import anthropic_caller as wire
from interlock.runtime.wire.anthropic_request import internal_request
from interlock.runtime.wire.base import Relayed, StreamRender
from interlock.runtime.wire.fields import OUTPUT_LIMITS

if TYPE_CHECKING:
    pass


class Messages(Translated):
    """``POST /v1/messages``; to a Messages upstream, the request goes as it came (``Native``) with its
    ``anthropic-beta``/``anthropic-version`` headers, and the answer comes back as it came."""

    forwards = frozenset({b"anthropic-beta", b"anthropic-version"})
    relays: str | None = "anthropic"  # (the base's type: mypyc refuses an override that narrows it)
    limits = OUTPUT_LIMITS["anthropic"]
    name = "anthropic"  # (one assignment a line: mypyc compiles no other in a class body)
    route = "messages"

    def translate(self, body: dict[str, Any]) -> Translation:
        return internal_request(body)

    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        if type(result) is Relayed:
            return orjson.dumps({**result.native, "model": parsed.echo})
        return orjson.dumps(wire.answer_of(result, parsed.echo))

    def stream(self, parsed: Parsed, candidate: str) -> StreamRender:
        return wire.Events(parsed.echo)

    def error(self, failure: Failure) -> bytes:
        return wire.error_body(failure.status, failure.message, failure.code, failure.gateway_code)
