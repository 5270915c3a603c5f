"""Ollama: ``GET /api/tags`` (installed models), ``POST /api/show`` (each one's capabilities and
context), ``GET /api/ps`` (what is loaded, and whether on the GPU), ``GET /api/version``."""

from __future__ import annotations

import re

from interlock.discover.base import Found, FoundModel, Http, ok

NUM_CTX = re.compile(r"^num_ctx\s+(\d+)\s*$", re.MULTILINE)


def probe(http: Http, url: str) -> Found | None:
    tags = ok(http.get("/api/tags"))
    if not isinstance(tags, dict) or not isinstance(tags.get("models"), list):
        return None
    ps = ok(http.get("/api/ps"))
    loaded = {
        m.get("name"): m.get("size_vram")
        for m in (ps.get("models") if isinstance(ps, dict) else None) or []
        if isinstance(m, dict)
    }
    models = []
    for entry in tags["models"]:
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name:
            models.append(_model(http, name, loaded))
    version = ok(http.get("/api/version"))
    server = "Ollama" + (
        f" {version['version']}" if isinstance(version, dict) and "version" in version else ""
    )
    on_cpu = [m for m in models if m.on_gpu is False]
    notes = []
    if on_cpu:
        notes.append(f"{on_cpu[0].name} is loaded in system memory, not on a GPU")
    return Found(
        url=url,
        server=server,
        kind="ollama",
        worker_url=url,
        models=tuple(models),
        profile="cpu-only" if on_cpu and not any(m.on_gpu for m in models) else None,
        notes=tuple(notes),
    )


def _model(http: Http, name: str, loaded: dict[object, object]) -> FoundModel:
    show = ok(http.post("/api/show", {"model": name}))
    capabilities: tuple[str, ...] | None = None
    context: int | None = None
    if isinstance(show, dict):
        caps = show.get("capabilities")
        if isinstance(caps, list):
            capabilities = tuple(c for c in caps if isinstance(c, str))
        parameters = show.get("parameters")
        match = NUM_CTX.search(parameters) if isinstance(parameters, str) else None
        info = show.get("model_info")
        trained = (
            next((v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)), None)
            if isinstance(info, dict)
            else None
        )
        context = int(match.group(1)) if match else trained
    vram = loaded.get(name)
    return FoundModel(
        name=name,
        context_tokens=context,
        capabilities=capabilities,
        loaded=name in loaded,
        on_gpu=(vram > 0) if isinstance(vram, int) else None,
    )
