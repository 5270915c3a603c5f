"""An Anthropic-compatible Messages API: ``POST /v1/messages`` without a key or a body answers with an
error in Anthropic's shape (``{"type": "error", "error": {...}}``); ``GET /v1/models`` lists its models
when it lets a caller without a key see them."""

from __future__ import annotations

from interlock.discover.base import MAX_MODELS, Found, FoundModel, Http, model_name, ok

VERSION = {"anthropic-version": "2023-06-01"}


def probe(http: Http, url: str) -> Found | None:
    answer = http.post("/v1/messages", {}, headers=VERSION)
    if answer is None:
        return None
    status, body = answer
    if not (isinstance(body, dict) and body.get("type") == "error" and isinstance(body.get("error"), dict)):
        return None
    listed = ok(http.get("/v1/models", headers=VERSION))
    data = listed.get("data") if isinstance(listed, dict) else None
    names = [model_name(m.get("id")) for m in data or [] if isinstance(m, dict)]
    models = tuple(FoundModel(name) for name in names[:MAX_MODELS] if name is not None)
    return Found(
        url=url,
        server="an Anthropic-compatible Messages API",
        kind="anthropic",
        worker_url=url,
        models=models,
        needs_key=status in (401, 403) or not models,
    )
