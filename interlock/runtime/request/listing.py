"""Ollama's listing routes: ``GET /api/tags``, ``POST /api/show``, ``GET /api/ps``, ``GET /api/version``
and ``GET``/``HEAD /``. Plain handlers, cold: they read the current plan and the live facts when asked, run
no lifecycle, and are neither counted nor logged; the Ollama surface gives them only their error shape
(``wire.ollama_caller.error_body``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from interlock.runtime.base.asgi import ClientGone, Receive, Scope, Send, read_object, send_json
from interlock.runtime.base.errors import GatewayError, InvalidRequest, shown
from interlock.runtime.books.fit import guaranteed_window
from interlock.runtime.loaded.callers import caller_of
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.loaded.tables import Alias, Candidate
from interlock.runtime.wire.ollama_caller import VERSION, error_body

if TYPE_CHECKING:
    from interlock.runtime.request.services import RequestServices


def _named(plan: RuntimePlan) -> list[tuple[str, Alias | Candidate]]:
    named: list[tuple[str, Alias | Candidate]] = list(plan.aliases.items())
    if plan.server.direct_models:
        named.extend((cid, candidate) for cid, candidate in plan.candidates.items() if candidate.in_plan)
    return named


def _details(family: str) -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "",
        "family": family,
        "families": [family],
        "parameter_size": "",
        "quantization_level": "",
    }


async def tags(services: RequestServices, scope: Scope, receive: Receive, send: Send) -> None:
    """``GET /api/tags``: every alias (and direct model) as an Ollama model."""
    plan = services.plan
    caller = caller_of(scope)
    models = [
        {
            "name": name,
            "model": name,
            "modified_at": services.status.loaded_at,
            "size": 0,
            "digest": "",
            "details": _details("alias" if isinstance(entry, Alias) else entry.kind),
        }
        for name, entry in _named(plan)
        if caller.may_call(name)
    ]
    await send_json(send, 200, orjson.dumps({"models": models}), [plan.plan_header])


async def show(services: RequestServices, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /api/show``: an alias's description, the capabilities it requires, the context it serves."""
    plan = services.plan
    headers = [plan.plan_header]
    try:
        body = await read_object(scope, receive, plan.server.max_body_bytes)
        name = body.get("model") or body.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidRequest("`model` must be a non-empty string")
    except ClientGone:
        return
    except GatewayError as exc:
        await send_json(send, exc.status, error_body(exc.message), headers)
        return
    entry = dict(_named(plan)).get(name) if caller_of(scope).may_call(name) else None
    if entry is None:  # a model the caller may not use is not shown either
        await send_json(send, 404, error_body(f"model '{shown(name)}' not found"), headers)
        return
    candidates = entry.candidates if isinstance(entry, Alias) else (entry,)
    window = guaranteed_window(entry, services.facts)  # the smallest of the chain: what a fallback holds
    contract = entry.contract if isinstance(entry, Alias) else None
    requires = list(entry.requires) if isinstance(entry, Alias) else []
    declared = set.intersection(*(set(c.capabilities or ()) for c in candidates)) if candidates else set()
    capabilities = sorted({"completion", *requires, *declared})
    description = entry.description if isinstance(entry, Alias) else ""
    answer = {
        "modelfile": "",
        "parameters": "",
        "template": "",
        "license": "",
        "details": _details("alias" if isinstance(entry, Alias) else entry.kind),
        "model_info": {
            "general.architecture": "interlock",
            "general.description": description or " -> ".join(c.id for c in candidates),
            "interlock.context_length": window,
            "interlock.output_tokens": contract.output_tokens if contract is not None else None,
            "interlock.candidates": [c.id for c in candidates],
            "interlock.requires": requires,
        },
        "capabilities": capabilities,
        "modified_at": services.status.loaded_at,
    }
    await send_json(send, 200, orjson.dumps(answer), headers)


async def ps(services: RequestServices, scope: Scope, receive: Receive, send: Send) -> None:
    """``GET /api/ps``: the models the workers report loaded (live metadata), as ``provider/model``."""
    plan, fleet = services.plan, services.current.fleet  # a plan with workers has a fleet
    models = []
    for cid, candidate in plan.candidates.items():
        for route in candidate.routes:
            if route.worker is None or fleet is None:
                continue
            loaded = fleet.facts.worker(route.endpoint.label).loaded or {}
            if candidate.facts_key in loaded:
                models.append(
                    {
                        "name": cid,
                        "model": cid,
                        "size": 0,
                        "digest": "",
                        "details": _details(candidate.kind),
                        "context_length": loaded[candidate.facts_key],
                        "worker": route.endpoint.label,
                    }
                )
    await send_json(send, 200, orjson.dumps({"models": models}), [plan.plan_header])


async def version(services: RequestServices, scope: Scope, receive: Receive, send: Send) -> None:
    await send_json(send, 200, orjson.dumps({"version": VERSION}), [services.plan.plan_header])


async def root(services: RequestServices, scope: Scope, receive: Receive, send: Send) -> None:
    """``GET /`` and ``HEAD /``: what Ollama answers, so clients that check for a server find one."""
    payload = b"Ollama is running"
    headers = [
        services.plan.plan_header,
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", b"%d" % len(payload)),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else payload})
