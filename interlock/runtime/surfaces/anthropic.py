"""The Anthropic Messages surface: ``POST /v1/messages`` (its ``count_tokens`` is ``request.count_tokens``).

How, in ``wire.anthropic_caller`` (the request into the internal, OpenAI-shaped form: what each field becomes,
what is named in ``X-Interlock-Dropped``; the answer, the event stream, the error body); field by field in
docs/surfaces.md. This module only picks them per request. To an ``anthropic`` candidate none of this applies:
the request goes as it came (``Native``, with its ``anthropic-beta``/``anthropic-version`` headers) and its
answer and events come back as they came, the model name replaced. ``x-api-key`` and ``anthropic-version`` are
accepted and not checked.
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
        return wire.internal_request(body)

    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        if type(result) is Relayed:
            return orjson.dumps({**result.native, "model": parsed.echo})
        return orjson.dumps(wire.answer_of(result, parsed.echo))

    def stream(self, parsed: Parsed, candidate: str) -> StreamRender:
        return wire.Events(parsed.echo)

    def error(self, failure: Failure) -> bytes:
        return wire.error_body(failure.status, failure.message, failure.code, failure.gateway_code)
