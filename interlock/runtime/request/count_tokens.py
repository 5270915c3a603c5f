"""``POST /v1/messages/count_tokens``: a plain handler that counts a Messages request's prompt as the server
that would answer it counts them, before any answer; the Messages surface gives its error shape and the
request's translation (``wire.anthropic_caller``).

The first candidate of the request's target that is not on hold is asked through its adapter
(``Adapter.count``: llama-server's ``/apply-template`` and ``/tokenize``, vLLM's and SGLang's
``/tokenize``, an Anthropic upstream's own ``count_tokens``), with a short deadline
(``COUNT_TIMEOUT_S``). Its count is cached by (server, model, the prompt's digest), so the same prompt
counted again costs no second round trip, and taught to the count book (``learned.CountBook``) as an
answer's count is: the chat request that follows (an agent counts, then sends) is then counted as the
server counts it by the preflight with no call at all. A server without a tokenizer, or that does
not answer: the estimate as learned there (``CountBook.prompt``).

The preflight of a chat request never calls the server (a round trip on every request): it reads the
count book, which this taught.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from interlock.runtime.base.asgi import ClientGone, Receive, Scope, Send, read_object, send_json
from interlock.runtime.books.estimate import Needs, needs_of
from interlock.runtime.books.learned import REPORTING_FLOOR, TRUNCATING_FLOOR
from interlock.runtime.loaded.callers import caller_of
from interlock.runtime.loaded.tables import Candidate, Target
from interlock.runtime.request.resolve import resolve
from interlock.runtime.surfaces.anthropic import Messages
from interlock.runtime.surfaces.base import check_model, failure_of
from interlock.runtime.wire import anthropic_caller as wire
from interlock.runtime.wire.base import Native

if TYPE_CHECKING:
    from interlock.runtime.request.services import RequestServices


async def count_tokens(services: RequestServices, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/messages/count_tokens``: the prompt's tokens as the server that would answer it counts
    them (its own tokenizer, else the estimate as learned there: ``count_prompt``);
    ``X-Interlock-Counted`` says which (``server`` or ``estimate``)."""
    plan = services.plan
    headers = [plan.plan_header]
    try:
        body = await read_object(scope, receive, plan.server.max_body_bytes)
        caller = caller_of(scope)
        target = resolve(plan, check_model(body), caller)
        caller.check(target.label)
        internal, _, _ = wire.internal_request(body, counting=True)
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


COUNT_TIMEOUT_S = 5.0


def digest(internal: Mapping[str, Any]) -> bytes:
    """What a prompt's count depends on: its messages and tools (not its output limit nor sampling)."""
    counted = [internal.get(k) for k in ("messages", "tools", "tool_choice")]
    return hashlib.blake2b(orjson.dumps(counted, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


async def count_prompt(
    services: RequestServices, target: Target, internal: Mapping[str, Any], native: Native, needs: Needs
) -> tuple[int, str]:
    """The prompt's tokens and where they came from (``server``: its tokenizer; ``estimate``: as learned
    there, or the estimate itself)."""
    candidate = _first_usable(services, target)
    text, schema = needs.prompt_tokens - needs.schema_tokens, needs.schema_tokens
    if candidate is None:
        return text + schema, "estimate"
    learned, route = services.learned, candidate.routes[0]
    label, model = route.endpoint.label, candidate.facts_key
    key = (learned.counts.servers.get(label, label), model, digest(internal))
    known = learned.told.get(key)
    if known is not None:
        return known, "server"
    adapter = services.router.adapters.get(candidate.kind)
    counted = None
    if adapter is not None:
        counted = await adapter.count(route.endpoint, candidate.model, internal, native, COUNT_TIMEOUT_S)
    if counted is None:
        floor = REPORTING_FLOOR if candidate.says_overflow else TRUNCATING_FLOOR
        return learned.counts.prompt(label, model, text, schema, floor), "estimate"
    learned.told.put(key, counted)
    learned.counts.learn(label, model, text, schema, counted)  # the chat request that follows
    return counted, "server"


def _first_usable(services: RequestServices, target: Target) -> Candidate | None:
    health = services.router.health
    for candidate in target.candidates:
        labels = (route.endpoint.label for route in candidate.routes)
        if candidate.routes and health.hold(candidate.id, labels, in_plan=candidate.in_plan) is None:
            return candidate
    return None
