"""The cold endpoints, a FastAPI app: models, aliases, health, metrics, liveness, readiness, status page,
the OpenAPI document and its interactive page (``/docs``, Swagger UI served from a package, offline).

None of these is on the request path of a completion; they read the gateway's current plan and live
state when asked. Health reports are redacted by construction: labels, times, status codes and short
error classes, never bodies, messages or credentials. Unknown paths and methods get OpenAI-shaped errors
(the path cut short). Every route answers GET and HEAD; none takes a body, so a request that comes with
one is answered at once and its connection closed (``app.LiveState``), never read to its end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import orjson
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from interlock.runtime.base.errors import shown
from interlock.runtime.books.fit import guaranteed_window
from interlock.runtime.books.metrics import CONTENT_TYPE
from interlock.runtime.loaded.callers import ANONYMOUS, Caller, caller_of
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.loaded.tables import Candidate, Provider, WorkerLimits, worker_label
from interlock.runtime.ops.routes import ROUTES
from interlock.runtime.ops.ui import STATIC
from interlock.runtime.state.base import SlotReport
from interlock.runtime.wire.openai_chat import error_body, error_type
from interlock.schema.plan import PlanContract

if TYPE_CHECKING:
    from interlock.runtime.fleet.plug import Fleet
    from interlock.runtime.request.services import LiveState
    from interlock.runtime.usage.ledger import Ledger

T = TypeVar("T")

PREFIX_RULE = (
    "a server worker's cost = expected_s (its wait) + miss x miss_s (prefill of the prompt's part not "
    "cached there, at its learned prompt speed) + evict x victim_s (prefill the held prompt it would "
    "evict costs that session's later turns); lowest first; a sticky pin decides only for a prompt "
    "without blocks"
)


def json_response(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


@dataclass(frozen=True, slots=True)
class ModelCatalog:
    """``GET /v1/models`` and ``GET /v1/models/{id}`` of one plan, encoded once: aliases first, then the
    plan's ``provider/model`` candidates when the plan allows direct models."""

    listing: bytes
    by_id: Mapping[str, bytes]


def model_objects(plan: RuntimePlan) -> list[dict[str, Any]]:
    """OpenAI model objects (``id``, ``object``, ``created``, ``owned_by``) with a short ``description``."""
    data: list[dict[str, Any]] = [
        {
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "interlock",
            "description": a.description or "alias: " + " -> ".join(c.id for c in a.candidates),
            "display_name": name,
            **_limits(a.contract),
        }
        for name, a in plan.aliases.items()
    ]
    if plan.server.direct_models:
        data.extend(
            {
                "id": cid,
                "object": "model",
                "created": 0,
                "owned_by": c.provider,
                "description": _candidate_description(c),
            }
            for cid, c in plan.candidates.items()
        )
    return data


def _limits(contract: PlanContract | None) -> dict[str, Any]:
    """What a client that discovers models needs of an alias, in the Anthropic Models API's names:
    ``display_name`` (Claude Code's picker), ``max_input_tokens`` (the guaranteed window, compiled),
    ``max_tokens`` (the output ceiling); only what the plan knows."""
    if contract is None:
        return {}
    out: dict[str, Any] = {}
    if contract.window_tokens is not None:
        out["max_input_tokens"] = contract.window_tokens
    if contract.output_tokens is not None:
        out["max_tokens"] = contract.output_tokens
    return out


def _candidate_description(candidate: Candidate) -> str:
    text = f"{candidate.model} on provider {candidate.provider} ({candidate.kind})"
    if candidate.capabilities is not None:
        text += "; " + ", ".join(sorted(candidate.capabilities))
    if candidate.context_tokens is not None:
        text += f"; {candidate.context_tokens} context tokens"
    return text


def model_catalog(plan: RuntimePlan, caller: Caller = ANONYMOUS) -> ModelCatalog:
    """The catalog ``caller`` sees: only what its ACL lets it call (everything for an anonymous one)."""
    objects = [m for m in model_objects(plan) if caller.may_call(m["id"])]
    return ModelCatalog(
        listing=orjson.dumps({"object": "list", "data": objects}),
        by_id={m["id"]: orjson.dumps(m) for m in objects},
    )


def model_not_found(plan: RuntimePlan, model_id: str) -> bytes:
    """OpenAI's 404 for an unknown model, saying what this gateway does list."""
    if plan.server.direct_models:
        listed = "its aliases and the plan's provider/model candidates"
    else:
        listed = "its aliases (direct provider/model requests are not allowed)"
    return error_body(
        f"The model `{shown(model_id)}` does not exist on this gateway; GET /v1/models lists {listed}",
        "invalid_request_error",
        param="model",
        code="model_not_found",
    )


class PerCaller(Generic[T]):
    """Values of one plan, one per caller key, each built on its first request after a load or reload,
    then a lookup: at most one per key of the plan, plus the anonymous one (a new plan drops them all)."""

    def __init__(self, build: Callable[[RuntimePlan, Caller], T]) -> None:
        self._build = build
        self._built: dict[tuple[str, str | None], T] = {}

    def get(self, plan: RuntimePlan, request: Request) -> T:
        caller = caller_of(request.scope)
        found = self._built.get((plan.content_hash, caller.key_id))
        if found is None:
            if any(digest != plan.content_hash for digest, _ in self._built):
                self._built.clear()
            found = self._built[plan.content_hash, caller.key_id] = self._build(plan, caller)
        return found


def openapi_bytes(plan: RuntimePlan, caller: Caller) -> bytes:
    """``/openapi.json`` of one plan for one caller, encoded."""
    from interlock.runtime.ops.openapi import plan_document

    return orjson.dumps(plan_document(plan, caller))


async def http_error(request: Request, exc: Exception) -> Response:
    """An HTTP error of the admin app (unknown path, method, UI section), in OpenAI's error shape."""
    assert isinstance(exc, HTTPException)  # the only class this handler is registered for
    status = exc.status_code
    message = f"{request.method} {shown(request.url.path)}: {exc.detail}"
    body = error_body(message, error_type(status), code=str(status))
    return Response(body, status_code=status, media_type="application/json", headers=exc.headers)


Endpoint = Callable[[Request], Awaitable[Response]]


class AdminEndpoints:
    """The cold endpoints of one gateway, each reading its current plan and live state when asked."""

    def __init__(self, live: LiveState) -> None:
        self.live = live
        self.catalogs = PerCaller(model_catalog)
        self.documents = PerCaller(openapi_bytes)

    def table(self) -> dict[str, Endpoint]:
        """Each admin route's path -> its endpoint (``ops.routes.ROUTES`` holds the same paths)."""
        return {
            "/v1/models": self.models,
            "/v1/models/{model_id:path}": self.model,
            "/v1/aliases": self.aliases,
            "/v1/health": self.health,
            "/v1/metadata": self.metadata,
            "/metrics": self.metrics,
            "/healthz": self.healthz,
            "/readyz": self.readyz,
            "/ui": self.ui,
            "/ui/static/{name}": self.ui_static,
            "/ui/{section}": self.ui_section,
            "/openapi.json": self.openapi,
            "/docs": self.docs,
            "/docs/static/{asset}": self.docs_static,
        }

    async def models(self, request: Request) -> Response:
        return Response(self.catalogs.get(self.live.plan, request).listing, media_type="application/json")

    async def model(self, request: Request) -> Response:
        plan = self.live.plan
        model_id: str = request.path_params["model_id"]
        body = self.catalogs.get(plan, request).by_id.get(model_id)
        if body is None:
            return Response(model_not_found(plan, model_id), status_code=404, media_type="application/json")
        return Response(body, media_type="application/json")

    async def aliases(self, request: Request) -> Response:
        live = self.live
        plan = live.plan
        caller = caller_of(request.scope)
        data = [
            {
                "name": name,
                "description": alias.description,
                "requires": list(alias.requires),
                "candidates": [_candidate(live, c) for c in alias.candidates],
                "window_tokens": guaranteed_window(alias, live.facts),
                "contract": alias.contract.model_dump(mode="json") if alias.contract else None,
            }
            for name, alias in plan.aliases.items()
            if caller.may_call(name)
        ]
        return json_response({"object": "list", "default": plan.server.default_alias, "data": data})

    async def health(self, request: Request) -> Response:
        return json_response(health_report(self.live, await self.live.slots.report()))

    async def metadata(self, request: Request) -> Response:
        return json_response(metadata_report(self.live))

    async def metrics(self, request: Request) -> Response:
        return Response(self.live.metrics.exposition(), media_type=CONTENT_TYPE)

    async def healthz(self, request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        if self.live.ready:
            return json_response({"status": "ready", "plan": self.live.plan.content_hash})
        return json_response({"status": "starting", "plan": self.live.plan.content_hash}, status=503)

    async def ui(self, request: Request) -> Response:
        from interlock.runtime.ops.ui.page import render_page  # jinja2: loaded on the first /ui request

        return html_response(await render_page(self.live))

    async def ui_static(self, request: Request) -> Response:
        from interlock.runtime.ops.ui.page import static

        return shipped(STATIC, request.path_params["name"], static, UI_HEADERS)

    async def ui_section(self, request: Request) -> Response:
        from interlock.runtime.ops.ui.page import render_section

        text = await render_section(self.live, request.path_params["section"])
        if text is None:
            raise HTTPException(404, "Not Found")
        return html_response(text)

    async def openapi(self, request: Request) -> Response:
        return Response(self.documents.get(self.live.plan, request), media_type="application/json")

    async def docs(self, request: Request) -> Response:
        page = get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="interlock: the gateway's API",
            swagger_js_url="/docs/static/swagger-ui-bundle.js",
            swagger_css_url="/docs/static/swagger-ui.css",
            swagger_favicon_url="/ui/static/favicon.svg",
        )
        return Response(page.body, media_type="text/html; charset=utf-8", headers=DOCS_HEADERS)

    async def docs_static(self, request: Request) -> Response:
        return shipped(DOCS_STATIC, request.path_params["asset"], docs_asset, DOCS_HEADERS)


def build_admin(live: LiveState) -> FastAPI:
    """The cold endpoints' application. FastAPI's own OpenAPI generation is off: ``/openapi.json`` is the
    gateway's document of the plan being served (``ops.openapi``), which ``/docs`` shows."""
    endpoints = AdminEndpoints(live).table()
    if endpoints.keys() != {route.path for route in ROUTES}:  # a row without its endpoint, or the reverse
        raise RuntimeError(
            f"admin routes and endpoints differ: {sorted(endpoints.keys() ^ {r.path for r in ROUTES})}"
        )
    app = FastAPI(
        openapi_url=None, docs_url=None, redoc_url=None, exception_handlers={HTTPException: http_error}
    )
    for route in ROUTES:
        app.add_api_route(
            route.path, endpoints[route.path], methods=list(route.methods), include_in_schema=False
        )
    # no `/v1/health/` -> `/v1/health` redirect: Starlette builds its Location from the Host header,
    # which the caller writes (`Host: evil.example` was sent to `http://evil.example/v1/health`)
    app.router.redirect_slashes = False
    return app


DOCS_STATIC = {  # Swagger UI's files that /docs loads, shipped in the fastapi-offline package
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
}

DOCS_HEADERS = {
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


def shipped(
    files: Mapping[str, str], name: str, read: Callable[[str], bytes], headers: Mapping[str, str]
) -> Response:
    """A file shipped with the gateway, by name (``files``: name -> media type; any other name is 404)."""
    media_type = files.get(name)
    if media_type is None:
        raise HTTPException(404, "Not Found")
    return Response(read(name), media_type=media_type, headers=headers)


def docs_asset(name: str) -> bytes:
    """One of Swagger UI's files (a name in ``DOCS_STATIC``), read from the fastapi-offline package."""
    from importlib import resources

    return resources.files("fastapi_offline").joinpath("static", name).read_bytes()


UI_HEADERS = {
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
}


def html_response(text: str) -> Response:
    return Response(text, media_type="text/html; charset=utf-8", headers=UI_HEADERS)


def _candidate(live: LiveState, candidate: Candidate) -> dict[str, Any]:
    return {
        "id": candidate.id,
        "provider": candidate.provider,
        "model": candidate.model,
        "healthy": candidate_healthy(live, candidate),
        **live.health.candidate_report(candidate.id),
    }


def candidate_healthy(live: LiveState, candidate: Candidate) -> bool:
    health = live.health
    if health.candidate_block(candidate.id) is not None:
        return False
    return any(health.endpoint_usable(r.endpoint.label) for r in candidate.routes)


def health_report(live: LiveState, slots: Mapping[str, SlotReport]) -> dict[str, Any]:
    """Providers, workers and every candidate, redacted: labels, times, statuses, short classes.

    ``slots`` is the backend's whole view (with ``--workers N``: every process of the host together).
    """
    plan, fleet = live.plan, live.fleet
    scores, speeds = (fleet.scorer.report(), fleet.speeds.snapshot()) if fleet is not None else ({}, {})
    workers = {
        name: _worker_report(live, name, limits, slots.get(name) or SlotReport())
        | {
            "score": scores.get(name),  # the last worker-choice score and its parts
            "learned_tokens_per_s": speeds.get(worker_label(limits.provider, name), {}),
        }
        for name, limits in plan.workers.items()
    }
    state = live.slots
    slot_state: dict[str, Any] = {"scope": state.scope, "degraded": state.degraded}
    if fleet is not None and fleet.line.usable:  # per candidate: waiting for any of its workers
        slot_state["fleet_waiting"] = fleet.line.report()  # (this process)
    report: dict[str, Any] = {
        "plan": {
            "content_hash": plan.content_hash,
            "loaded_at": live.loaded_at,
            "last_reload": live.last_reload,
        },
        "ready": live.ready,
        "providers": {name: _provider_report(live, p) for name, p in plan.providers.items()},
        "workers": workers,
        "slot_state": slot_state,
        "usage": usage_report(live.ledger, plan),
        "candidates": {cid: _candidate(live, c) for cid, c in plan.candidates.items()},
    }
    if fleet is not None and fleet.placement.shown(plan):  # only where placement can place
        report["placement"] = fleet.placement.report(plan)
    learned = live.learned.report() if live.learned is not None else {}
    if learned:  # per endpoint and model: prompt speed and counts, once an answer taught them
        report["learned"] = learned
    if fleet is not None and (len(fleet.scorer.prefixes) or plan.routing.prefix is not None):
        report["prefix_affinity"] = _prefix_affinity_report(plan, fleet)  # the rule, and what it has seen
    if fleet is not None and plan.routing.sticky is not None:  # only when sticky sessions are on
        report["sticky_sessions"] = {"sessions": len(fleet.sticky), "repinned": fleet.sticky.repinned}
    return report


def _provider_report(live: LiveState, provider: Provider) -> dict[str, Any]:
    """One provider in the health report: its endpoints' health and its timeouts."""
    endpoints = [
        {"endpoint": e.label, "worker": w, **live.health.endpoint_report(e.label)}
        for e, w in zip(provider.endpoints, provider.workers, strict=True)
    ]
    timing = provider.endpoints[0]  # every endpoint of a provider has its timeouts
    return {
        "kind": provider.kind,
        "probe": provider.probe,
        "healthy": any(e["healthy"] for e in endpoints),
        "timeouts": {
            "connect_s": timing.connect_s,
            "first_byte_s": timing.first_byte_s,
            "idle_s": timing.idle_s,
            "total_s": timing.total_s,
        },
        "endpoints": endpoints,
    }


def _worker_report(live: LiveState, name: str, limits: WorkerLimits, pool: SlotReport) -> dict[str, Any]:
    """One worker in the health report: its slots and queue, telemetry and server load where it has them."""
    label = worker_label(limits.provider, name)
    report: dict[str, Any] = {
        "provider": limits.provider,
        "healthy": live.health.endpoint_usable(label),
        "max_concurrent": limits.max_concurrent,
        "slots_in_use": pool.in_use,
        "in_use_by_model": dict(pool.per_model),
        "queue_waiting": pool.waiting,
        "queue": {"max_waiting": limits.max_waiting, "max_wait_s": limits.max_wait_s},
    }
    fleet = live.fleet  # a plan with workers has one
    telemetry = fleet.telemetry.report(name) if fleet is not None else None
    if telemetry is not None:  # only for workers that declare telemetry
        report["telemetry"] = telemetry
    if limits.server is not None:  # an OpenAI-compatible server's own load, as last read (None: unknown)
        load = fleet.facts.load(label) if fleet is not None else None
        report["server"] = {
            "kind": limits.server,
            "load": load.report() if load else None,
            # whether it makes progress: a call's first byte waits on while it does
            "progress": fleet.progress.report(label) if fleet is not None else None,
            # the window one request gets there, as the server says (a llama-server slot's ``n_ctx``)
            "slot_window": live.facts.slot_windows.get(label),
        }
    return report


def _prefix_affinity_report(plan: RuntimePlan, fleet: Fleet) -> dict[str, Any]:
    """The prefix-affinity rule workers are scored by (or that it is off), and what the scorer has seen."""
    affinity = plan.routing.prefix
    return {
        "rule": PREFIX_RULE if affinity is not None else "off: workers are scored on their load alone",
        "weights": None
        if affinity is None
        else {"miss": affinity.miss, "evict": affinity.evict, "spare_prompts": affinity.spare_prompts},
        **fleet.scorer.prefixes.report(),
    }


def usage_report(ledger: Ledger, plan: RuntimePlan) -> dict[str, Any]:
    """The usage ledger's writer (where it commits, what is not committed yet) and every tenant's and
    key's budget for the month (``∞``: unlimited)."""
    from interlock.runtime.usage.credits import budget_report

    return {
        "store": ledger.store.kind,
        "waiting_debits": ledger.waiting,
        "commits": ledger.flushes,
        "failures": ledger.failures,
        "dropped_rows": ledger.dropped_rows,
        "last_error": ledger.last_error,
        **budget_report(ledger, plan.source.access),
    }


def metadata_report(live: LiveState) -> dict[str, Any]:
    """What the preflight knows now: live worker facts, and per candidate and route its capabilities and
    effective context with their source (``loaded``, ``modelfile``, ``default``, ``declared``, ...)."""
    from interlock.runtime.books.fit import capabilities_on, effective_context

    plan, facts = live.plan, live.facts
    candidates: dict[str, Any] = {}
    for cid, candidate in plan.candidates.items():
        routes = {}
        for route in candidate.routes:
            caps = capabilities_on(route, candidate, facts)
            window, source = effective_context(route, candidate, facts)
            info = facts.model(route.endpoint.label, candidate.facts_key) if route.worker else None
            if caps is None:
                caps_source = "unknown"
            else:
                caps_source = "live" if info is not None and info.capabilities is not None else "declared"
            routes[route.endpoint.label] = {
                "capabilities": sorted(caps) if caps is not None else None,
                "capabilities_source": caps_source,
                "context_tokens": window,
                "context_source": source,
            }
        candidates[cid] = routes
    workers = live.fleet.facts.snapshot() if live.fleet is not None else {}
    return {"mode": plan.preflight.mode, "workers": workers, "candidates": candidates}
