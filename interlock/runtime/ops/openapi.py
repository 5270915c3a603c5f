"""The OpenAPI 3.1 document of every route the gateway serves, assembled from its two route tables.

The surface rows (``request.route_table.rows``) and the admin routes (``ops.routes.ROUTES``) each name their
``Doc`` (in ``surfaces/contract.py`` and ``ops/contract.py``, imported only here: a gateway loads them with
its first ``/openapi.json``); this module only assembles them, so a route added to either table is in the
document, and nothing here lists a route. Only the model names change with the plan: the gateway builds its
``/openapi.json`` once per plan (on the first request after a load or reload); ``interlock openapi`` writes
the same document for a configuration or a plan.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from interlock.runtime.loaded.callers import ANONYMOUS, Caller, needs_key, operator_route
from interlock.runtime.surfaces.contract import OPENAI_ERROR, Doc
from interlock.schema.plan import SURFACES

if TYPE_CHECKING:
    from interlock.runtime.loaded.plan import RuntimePlan

OPENAPI_VERSION = "3.1.0"

STATUSES: Mapping[str, str] = {
    "400": "The request is invalid, names a direct model that is not allowed, or no candidate can serve it",
    "401": "No caller key, or one this gateway does not know (`Authorization: Bearer` or `x-api-key`)",
    "402": "The caller's key or tenant has used up its credits for the window (`insufficient_quota`)",
    "403": "An operator route (it shows every tenant's state), and a caller key that is not an operator",
    "404": "The model (or the item asked for) does not exist on this gateway, or the caller's key may not "
    "use it (the two answers are alike: a refused model is not confirmed to exist)",
    "405": "The path is served, with other methods (named in `Allow`)",
    "413": "The request body is over `server.max_body_bytes`",
    "429": "The caller's key or tenant is over a rate, or every candidate is busy or rate limited "
    "(see `Retry-After`)",
    "4XX": "An upstream refused the request; its status is passed on (401/403: it refused the gateway's "
    "credentials for it, never the caller's)",
    "503": "Every candidate failed or is unavailable (each one's outcome is in the message)",
}
"""Every error status a route may document, and what it means; a test ties the status of every
``GatewayError`` class to a row here."""

_PATH_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}")


@dataclass(frozen=True, slots=True)
class Route:
    """One ``(method, path)`` the gateway serves, with its contract; ``path`` in OpenAPI's syntax."""

    method: str
    path: str
    doc: Doc


def routes(surfaces: Iterable[str] = SURFACES) -> Iterator[Route]:
    """Every route: the surface rows (of ``surfaces``: a plan's ``server.surfaces``), then the admin
    routes (each method of each)."""
    from interlock.runtime.ops import contract as ops_contract
    from interlock.runtime.ops.routes import ROUTES
    from interlock.runtime.request.route_table import rows
    from interlock.runtime.surfaces import contract as surface_contract

    for row in rows(surfaces):
        yield Route(row.method, row.path, _doc(surface_contract, row.doc, row.path))
    for admin in ROUTES:
        path = _PATH_PARAM.sub(r"{\1}", admin.path)  # Starlette's `{name:path}` -> `{name}`
        doc = _doc(ops_contract, admin.doc, admin.path)
        for method in admin.methods:
            yield Route(method, path, doc)


def _doc(module: ModuleType, name: str, path: str) -> Doc:
    """The ``Doc`` a route names in its contract module; a name that is none is a broken table."""
    doc = getattr(module, name, None)
    if not isinstance(doc, Doc):
        raise LookupError(f"{path}: {module.__name__} has no Doc named {name!r}")
    return doc


SECURITY_SCHEMES: Mapping[str, Any] = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "A caller key (`server.auth`)"},
    "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key", "description": "The same key"},
}


def document(
    models: Sequence[str] | None = None,
    *,
    default_model: bool = True,
    auth: str = "off",
    operators: bool = False,
    surfaces: Iterable[str] = SURFACES,
) -> dict[str, Any]:
    """The document. ``models``: the names ``model`` accepts (else any non-empty string);
    ``default_model``: the plan has a default alias, so ``model`` may be left out; ``auth``: the plan's
    ``server.auth`` (``optional``/``required``: the routes behind keys say so, and may answer 401);
    ``operators``: the plan declares an operator key, so the operator routes may answer 403;
    ``surfaces``: the API surfaces served (``server.surfaces``)."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes(surfaces):
        operation = _operation(route, default_model)
        if auth != "off" and needs_key(route.path):
            _secure(operation, route, optional=auth == "optional")
            if operators and operator_route(route.path) is not None:
                _operator_only(operation, route)
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    model_name: dict[str, Any] = {"type": "string", "minLength": 1}
    if models is not None:
        model_name = {"type": "string", "enum": list(models)}
    model_name["description"] = "An alias, or `provider/model` when the plan allows direct models"
    components: dict[str, Any] = {"schemas": {"ModelName": model_name}}
    if auth != "off":
        components["securitySchemes"] = SECURITY_SCHEMES
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "interlock",
            "version": _version(),
            "description": "An LLM gateway: OpenAI, Ollama, Anthropic and Responses surfaces over one "
            "routing plan, and its health, metrics and status page.",
        },
        "paths": paths,
        "components": components,
    }


def plan_document(plan: RuntimePlan, caller: Caller = ANONYMOUS) -> dict[str, Any]:
    """The document a gateway serving ``plan`` answers ``caller`` at ``/openapi.json``: ``model``
    lists what ``GET /v1/models`` lists for it."""
    names = [name for name in plan.aliases if caller.may_call(name)]
    if plan.server.direct_models:
        names.extend(
            cid for cid, candidate in plan.candidates.items() if candidate.in_plan and caller.may_call(cid)
        )
    keys = plan.keys
    auth = keys.mode if keys is not None else "off"
    operators = keys is not None and keys.operators
    return document(
        names,
        default_model=plan.server.default_alias is not None,
        auth=auth,
        operators=operators,
        surfaces=plan.source.server.surfaces,
    )


TWO_KEYS = "Two different caller keys in one request (`Authorization` and `x-api-key`, or one twice)"


def _secure(operation: dict[str, Any], route: Route, *, optional: bool) -> None:
    """A route behind the caller keys: either scheme (or none, under ``optional``), its 401, and the 400
    for two different keys (where the route has no 400 of its own)."""
    operation["security"] = [{"bearer": []}, {"apiKey": []}, *([{}] if optional else [])]
    content = {"application/json": {"schema": route.doc.error or OPENAI_ERROR}}
    for status, description in (("401", STATUSES["401"]), ("400", TWO_KEYS)):
        if status in operation["responses"]:
            continue
        answer: dict[str, Any] = {"description": description}
        if route.method != "HEAD":
            answer["content"] = content
        operation["responses"][status] = answer


OPERATOR_ONLY = "The route shows every tenant's state and the key sent is not an operator (`operator: true`)"


def _operator_only(operation: dict[str, Any], route: Route) -> None:
    """An operator route of a plan with operator keys: its 403 for the other keys."""
    answer: dict[str, Any] = {"description": OPERATOR_ONLY}
    if route.method != "HEAD":
        answer["content"] = {"application/json": {"schema": route.doc.error or OPENAI_ERROR}}
    operation["responses"]["403"] = answer


def _operation(route: Route, default_model: bool) -> dict[str, Any]:
    doc, head = route.doc, route.method == "HEAD"
    ok: dict[str, Any] = {"description": "OK"}
    if not head:  # a HEAD answer has the headers of GET's and no body
        ok["content"] = {media: {"schema": schema} for media, schema in doc.answers.items()}
    responses: dict[str, Any] = {"200": ok}
    for status in doc.statuses:
        answer: dict[str, Any] = {"description": STATUSES[status]}
        if doc.error is not None and not head:
            answer["content"] = {"application/json": {"schema": doc.error}}
        responses[status] = answer
    for status, schema in doc.extra.items():
        responses[status] = {"description": STATUSES.get(status, "Not ready yet")}
        if not head:
            responses[status]["content"] = {"application/json": {"schema": schema}}
    slug = re.sub(r"[^A-Za-z0-9]+", "_", route.path).strip("_") or "root"
    operation: dict[str, Any] = {
        "operationId": f"{route.method.lower()}_{slug}",
        "summary": doc.summary,
        "tags": [doc.tag],
        "responses": responses,
    }
    names = _PATH_PARAM.findall(route.path)
    if names:
        operation["parameters"] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
            for name in names
        ]
    if doc.request is not None:
        schema = dict(doc.request)
        if not default_model and "model" in schema.get("properties", {}):
            schema["required"] = [*schema.get("required", ()), "model"]
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
    return operation


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("interlock")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return "0"
