"""Any OpenAI-compatible server: ``GET /v1/models``. vLLM and SGLang name themselves in ``owned_by``
and give each model's window (``max_model_len``); LM Studio's ``GET /api/v0/models`` gives its own."""

from __future__ import annotations

from typing import Any

from interlock.common.bounds import window
from interlock.discover.base import MAX_MODELS, Found, FoundModel, Http, model_name, ok

SERVERS = {"vllm": ("vLLM", "vllm"), "sglang": ("SGLang", "sglang")}  # owned_by -> (name, `server:`)


def probe(http: Http, url: str) -> Found | None:
    answer = http.get("/v1/models")
    if answer is None:
        return None
    status, body = answer
    if status in (401, 403) and isinstance(body, dict) and "error" in body:
        return Found(
            url=url,
            server="an OpenAI-compatible server",
            kind="openai",
            worker_url=f"{url}/v1",
            needs_key=True,
        )
    data = body.get("data") if status == 200 and isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    listed = [m for m in data if isinstance(m, dict)]
    entries = [m for m in listed if model_name(m.get("id")) is not None]
    notes = []
    if len(entries) < len(listed):
        notes.append(f"{len(listed) - len(entries)} model(s) left out: no name usable in a configuration")
    if len(entries) > MAX_MODELS:
        notes.append(f"{len(entries) - MAX_MODELS} model(s) left out: only the first {MAX_MODELS} are read")
        entries = entries[:MAX_MODELS]
    owners = {m.get("owned_by") for m in entries if isinstance(m.get("owned_by"), str)}
    server, signals = next(
        (SERVERS[o] for o in owners if o in SERVERS), ("an OpenAI-compatible server", None)
    )
    studio = _lm_studio(http)
    if studio is not None:
        server = "LM Studio"
    models = tuple(_model(m, studio, loaded=signals is not None) for m in entries)  # vLLM, SGLang: in memory
    return Found(
        url=url,
        server=server,
        kind="openai",
        worker_url=f"{url}/v1",
        models=models,
        signals=signals,
        notes=tuple(notes),
    )


def _lm_studio(http: Http) -> dict[str, dict[str, Any]] | None:
    body = ok(http.get("/api/v0/models"))
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    return {m["id"]: m for m in data[:MAX_MODELS] if isinstance(m, dict) and isinstance(m.get("id"), str)}


def _model(entry: dict[str, Any], studio: dict[str, dict[str, Any]] | None, loaded: bool) -> FoundModel:
    name: str = entry["id"]
    tokens = window(entry.get("max_model_len"))
    capabilities: tuple[str, ...] | None = None
    extra = (studio or {}).get(name)
    if extra is not None:
        tokens = window(extra.get("loaded_context_length")) or window(extra.get("max_context_length"))
        kind = extra.get("type")
        capabilities = {
            "llm": ("completion",),
            "vlm": ("completion", "vision"),
            "embeddings": ("embedding",),
        }.get(kind if isinstance(kind, str) else "")
    return FoundModel(
        name,
        tokens,
        capabilities,
        loaded=loaded or bool(extra and extra.get("state") == "loaded"),
    )
