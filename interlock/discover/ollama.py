"""Ollama: ``GET /api/tags`` (installed models), ``POST /api/show`` (each one's capabilities and
context), ``GET /api/ps`` (what is loaded, and whether on the GPU), ``GET /api/version``."""

from __future__ import annotations

import re

from interlock.common.bounds import window, window_text
from interlock.discover.base import MAX_MODELS, Found, FoundModel, Http, model_name, ok, said

NUM_CTX = re.compile(r"^num_ctx[ \t]+(\S+)[ \t]*$", re.MULTILINE)


def probe(http: Http, url: str) -> Found | None:
    tags = ok(http.get("/api/tags"))
    if not isinstance(tags, dict) or not isinstance(tags.get("models"), list):
        return None
    ps = ok(http.get("/api/ps"))
    running = ps.get("models") if isinstance(ps, dict) else None
    loaded = {m.get("name"): _on_gpu(m.get("size_vram")) for m in running or [] if isinstance(m, dict)}
    entries = [e.get("name") if isinstance(e, dict) else None for e in tags["models"]]
    names = [n for n in map(model_name, entries) if n is not None]
    notes = []
    if len(names) < len(entries):
        notes.append(f"{len(entries) - len(names)} model(s) left out: no name usable in a configuration")
    if len(names) > MAX_MODELS:
        notes.append(f"{len(names) - MAX_MODELS} model(s) left out: only the first {MAX_MODELS} are read")
    models = [_model(http, name, loaded) for name in names[:MAX_MODELS]]
    version = ok(http.get("/api/version"))
    number = version.get("version") if isinstance(version, dict) else None
    server = "Ollama" + (f" {said(number)}" if isinstance(number, str) else "")
    on_cpu = [m for m in models if m.on_gpu is False]
    if on_cpu:
        notes.append(f"{said(on_cpu[0].name)} is loaded in system memory, not on a GPU")
    return Found(
        url=url,
        server=server,
        kind="ollama",
        worker_url=url,
        models=tuple(models),
        profile="cpu-only" if on_cpu and not any(m.on_gpu for m in models) else None,
        notes=tuple(notes),
    )


def _on_gpu(size_vram: object) -> bool | None:
    """``/api/ps``' ``size_vram``: above 0, the model is on a GPU; None where the server does not say."""
    if isinstance(size_vram, int) and not isinstance(size_vram, bool):
        return size_vram > 0
    return None


def _model(http: Http, name: str, loaded: dict[object, bool | None]) -> FoundModel:
    show = ok(http.post("/api/show", {"model": name}))
    capabilities: tuple[str, ...] | None = None
    context: int | None = None
    if isinstance(show, dict):
        caps = show.get("capabilities")
        if isinstance(caps, list):
            capabilities = tuple(c for c in caps if isinstance(c, str) and model_name(c) is not None)
        parameters = show.get("parameters")
        match = NUM_CTX.search(parameters) if isinstance(parameters, str) else None
        info = show.get("model_info")
        trained = (
            next((window(v) for k, v in info.items() if str(k).endswith(".context_length")), None)
            if isinstance(info, dict)
            else None
        )
        context = (window_text(match.group(1).strip('"')) if match else None) or trained
    return FoundModel(
        name=name,
        context_tokens=context,
        capabilities=capabilities,
        loaded=name in loaded,
        on_gpu=loaded.get(name),
    )
