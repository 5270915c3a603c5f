"""The ops app's routes: path, methods and contract of each (the OpenAPI document reads them too)."""

from __future__ import annotations

from dataclasses import dataclass

from interlock.runtime.ops import contract
from interlock.runtime.surfaces.contract import Doc

READ = ("GET", "HEAD")  # HEAD answers like GET without the body (uvicorn drops it)


@dataclass(frozen=True, slots=True)
class AdminRoute:
    """One admin route: its path (Starlette's syntax), methods and contract (``runtime.ops.openapi``)."""

    path: str
    doc: Doc
    methods: tuple[str, ...] = READ


ROUTES: tuple[AdminRoute, ...] = (
    AdminRoute("/v1/models", contract.MODELS),
    AdminRoute("/v1/models/{model_id:path}", contract.MODEL_BY_ID),  # GET and HEAD, as every route
    AdminRoute("/v1/aliases", contract.ALIASES),
    AdminRoute("/v1/health", contract.HEALTH),
    AdminRoute("/v1/metadata", contract.METADATA),
    AdminRoute("/metrics", contract.METRICS),
    AdminRoute("/healthz", contract.HEALTHZ),
    AdminRoute("/readyz", contract.READYZ),
    AdminRoute("/ui", contract.UI),
    AdminRoute("/ui/static/{name}", contract.UI_STATIC),
    AdminRoute("/ui/{section}", contract.UI_SECTION),
    AdminRoute("/openapi.json", contract.OPENAPI),
    AdminRoute("/docs", contract.DOCS),
    AdminRoute("/docs/static/{asset}", contract.DOCS_STATIC),
)
"""The admin app's routes; ``build_admin`` registers one endpoint for each, in this order."""
