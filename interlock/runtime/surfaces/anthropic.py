"""The Anthropic Messages surface: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

What it does, below; how, in ``wire.anthropic`` (the request's translation, the answer, the event
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

from interlock.runtime.base.asgi import (
    ClientGone,
    Receive,
    Scope,
    Send,
    read_object,
    send_json,
)
from interlock.runtime.books.estimate import needs_of
from interlock.runtime.counting import count_prompt
from interlock.runtime.loaded.access import caller_of
from interlock.runtime.request.resolve import resolve
from interlock.runtime.surfaces.base import (
    Failure,
    Parsed,
    Translated,
    Translation,
    check_model,
    failure_of,
)
from interlock.runtime.wire import anthropic as wire
from interlock.runtime.wire.anthropic_request import internal_request
from interlock.runtime.wire.base import Native, Relayed, StreamRender
from interlock.runtime.wire.fields import OUTPUT_LIMITS

if TYPE_CHECKING:
    from interlock.runtime.services import RequestServices


class Messages(Translated):
    """``POST /v1/messages``; to a Messages upstream, the request goes as it came (``Native``) with its
    ``anthropic-beta``/``anthropic-version`` headers, and the answer comes back as it came."""

    forwards = frozenset({b"anthropic-beta", b"anthropic-version"})
    relays: str | None = "anthropic"  # (the base's type: mypyc refuses an override that narrows it)
    limits = OUTPUT_LIMITS["anthropic"]
    name, route = "anthropic", "messages"

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


async def count_tokens(services: RequestServices, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/messages/count_tokens``: the prompt's tokens as the server that would answer it counts
    them (its own tokenizer, else the estimate as learned there: ``runtime.counting``);
    ``X-Interlock-Counted`` says which (``server`` or ``estimate``)."""
    plan = services.plan
    headers = [plan.plan_header]
    try:
        body = await read_object(scope, receive, plan.server.max_body_bytes)
        caller = caller_of(scope)
        target = resolve(plan, check_model(body), caller)
        caller.check(target.label)
        internal, _, _ = internal_request(body, counting=True)
        needs = needs_of(internal, "chat", plan.preflight)
        sent = {
            k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"] if k in Messages.forwards
        }
        native = Native("anthropic", body, sent)
        tokens, source = await count_prompt(services, target, internal, native, needs)
    except ClientGone:
        return
    except Exception as exc:  # a refusal; anything else is a bug, logged and answered 500
        failure = failure_of(exc, plan)
        headers.extend(failure.headers)
        await send_json(send, failure.status, wire.error_body(failure.status, failure.message), headers)
        return
    tokens += needs.images * plan.preflight.image_reserve_tokens if source == "estimate" else 0
    headers.append((b"x-interlock-counted", source.encode()))
    await send_json(send, 200, orjson.dumps({"input_tokens": tokens}), headers)
