"""``POST /v1/messages/count_tokens``: a plain handler that counts a Messages request's prompt as the server
that would answer it counts (``request.counting``); the Messages surface gives its error shape and the
request's translation (``wire.anthropic_request``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from interlock.runtime.base.asgi import ClientGone, Receive, Scope, Send, read_object, send_json
from interlock.runtime.books.estimate import needs_of
from interlock.runtime.loaded.callers import caller_of
from interlock.runtime.request.counting import count_prompt
from interlock.runtime.request.resolve import resolve
from interlock.runtime.surfaces.anthropic import Messages
from interlock.runtime.surfaces.base import check_model, failure_of
from interlock.runtime.wire import anthropic_caller as wire
from interlock.runtime.wire.anthropic_request import internal_request
from interlock.runtime.wire.base import Native

if TYPE_CHECKING:
    from interlock.runtime.request.services import RequestServices


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
