"""Any OpenAI-compatible server: ``GET /v1/models``. vLLM and SGLang name themselves in ``owned_by``
and give each model's window (``max_model_len``); LM Studio's ``GET /api/v0/models`` gives its own."""

from __future__ import annotations

from typing import Any

from interlock.discover.base import Found, FoundModel, Http, ok

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
    entries = [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
    owners = {m.get("owned_by") for m in entries}
    server, signals = next(
        (SERVERS[o] for o in owners if o in SERVERS), ("an OpenAI-compatible server", None)
    )
    studio = _lm_studio(http)
    if studio is not None:
        server = "LM Studio"
    models = tuple(_model(m, studio, loaded=signals is not None) for m in entries)  # vLLM, SGLang: in memory
    return Found(
        url=url, server=server, kind="openai", worker_url=f"{url}/v1", models=models, signals=signals
    )


def _lm_studio(http: Http) -> dict[str, dict[str, Any]] | None:
    body = ok(http.get("/api/v0/models"))
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    return {m["id"]: m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)}


def _model(entry: dict[str, Any], studio: dict[str, dict[str, Any]] | None, loaded: bool) -> FoundModel:
    name: str = entry["id"]
    window = entry.get("max_model_len")
    capabilities: tuple[str, ...] | None = None
    extra = (studio or {}).get(name)
    if extra is not None:
        window = extra.get("loaded_context_length") or extra.get("max_context_length")
        kind = extra.get("type")
        capabilities = {
            "llm": ("completion",),
            "vlm": ("completion", "vision"),
            "embeddings": ("embedding",),
        }.get(kind if isinstance(kind, str) else "")
    return FoundModel(
        name,
        window if isinstance(window, int) else None,
        capabilities,
        loaded=loaded or bool(extra and extra.get("state") == "loaded"),
    )
