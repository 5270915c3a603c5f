"""The ops app's routes: path, methods and contract of each (the OpenAPI document reads them too)."""

from __future__ import annotations

from dataclasses import dataclass

READ = ("GET", "HEAD")  # HEAD answers like GET without the body (uvicorn drops it)


@dataclass(frozen=True, slots=True)
class AdminRoute:
    """One admin route: its path (Starlette's syntax), methods and contract: the name of its ``Doc`` in
    ``ops/contract.py``, read only to build the OpenAPI document (``runtime.ops.openapi``)."""

    path: str
    doc: str
    methods: tuple[str, ...] = READ


ROUTES: tuple[AdminRoute, ...] = (
    AdminRoute("/v1/models", "MODELS"),
    AdminRoute("/v1/models/{model_id:path}", "MODEL_BY_ID"),  # GET and HEAD, as every route
    AdminRoute("/v1/aliases", "ALIASES"),
    AdminRoute("/v1/health", "HEALTH"),
    AdminRoute("/v1/metadata", "METADATA"),
    AdminRoute("/metrics", "METRICS"),
    AdminRoute("/healthz", "HEALTHZ"),
    AdminRoute("/readyz", "READYZ"),
    AdminRoute("/ui", "UI"),
    AdminRoute("/ui/static/{name}", "UI_STATIC"),
    AdminRoute("/ui/{section}", "UI_SECTION"),
    AdminRoute("/openapi.json", "OPENAPI"),
    AdminRoute("/docs", "DOCS"),
    AdminRoute("/docs/static/{asset}", "DOCS_STATIC"),
)
"""The admin app's routes; ``build_admin`` registers one endpoint for each, in this order."""
