"""What each admin route takes and answers: the ops routes' half of the OpenAPI document (the surface
routes' half, and the ``Doc`` they share, are ``surfaces.contract``).
"""

from __future__ import annotations

from interlock.runtime.ops.ui import STATIC
from interlock.runtime.surfaces.contract import INTEGER, OBJECT, OPENAI_ERROR, STRING, Doc, _obj

_OPENAI_MODEL = _obj(("id", "object", "owned_by"), id=STRING, object=STRING, created=INTEGER, owned_by=STRING)
MODELS = Doc(
    "The plan's aliases (and provider/model candidates when direct models are allowed)",
    "admin",
    {
        "application/json": _obj(
            ("object", "data"), object=STRING, data={"type": "array", "items": _OPENAI_MODEL}
        )
    },
)
MODEL_BY_ID = Doc(
    "One model of GET /v1/models", "admin", {"application/json": _OPENAI_MODEL}, None, OPENAI_ERROR, ("404",)
)
ALIASES = Doc(
    "Each alias with its candidates and their health",
    "admin",
    {"application/json": _obj(("object", "data"), object=STRING, data={"type": "array", "items": OBJECT})},
)
HEALTH = Doc(
    "Providers, workers, candidates: health, slots, telemetry (redacted)",
    "admin",
    {"application/json": _obj(("plan", "ready", "providers", "workers", "candidates"))},
)
METADATA = Doc(
    "What the preflight knows: live worker facts, capabilities and context per route",
    "admin",
    {"application/json": _obj(("mode", "workers", "candidates"))},
)
METRICS = Doc("Prometheus metrics", "admin", {"text/plain": STRING})
HEALTHZ = Doc("Liveness", "admin", {"application/json": _obj(("status",), status={"const": "ok"})})
_READY = _obj(("status", "plan"), status=STRING, plan=STRING)
READYZ = Doc(
    "Readiness: 200 once started (and the first probe round is done), else 503",
    "admin",
    {"application/json": _READY},
    extra={"503": _READY},
)
UI = Doc("The status page", "ui", {"text/html": STRING})
UI_STATIC = Doc(
    "The status page's script, style and icon",
    "ui",
    {media.split(";")[0]: STRING for media in STATIC.values()},
    None,
    OPENAI_ERROR,
    ("404",),
)
UI_SECTION = Doc(
    "One section of the status page (it refreshes itself with these)",
    "ui",
    {"text/html": STRING},
    None,
    OPENAI_ERROR,
    ("404",),
)
OPENAPI = Doc("This document", "admin", {"application/json": _obj(("openapi", "paths"))})
DOCS = Doc(
    "This document as an interactive page (Swagger UI, served offline)", "admin", {"text/html": STRING}
)
DOCS_STATIC = Doc(
    "The interactive page's script and style (Swagger UI's, shipped in the fastapi-offline package)",
    "admin",
    {"text/javascript": STRING, "text/css": STRING},
    None,
    OPENAI_ERROR,
    ("404",),
)
