"""llama.cpp's ``llama-server``: ``GET /props`` (slots, the context per slot, what its chat template can
do, modalities), ``GET /v1/models`` (the model's name), ``GET /slots`` (when on: the slots themselves)."""

from __future__ import annotations

from interlock.discover.base import Found, FoundModel, Http, ok


def probe(http: Http, url: str) -> Found | None:
    props = ok(http.get("/props"))
    if not isinstance(props, dict) or not isinstance(props.get("total_slots"), int):
        return None
    settings = props.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    listed = http.get("/v1/models")
    models = ok(listed)
    data = models.get("data") if isinstance(models, dict) else None
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    name = first.get("id") or props.get("model_alias") or "default"
    capabilities = ["completion"]
    caps = props.get("chat_template_caps")
    if isinstance(caps, dict) and caps.get("supports_tools"):
        capabilities.append("tools")
    modalities = props.get("modalities")
    if isinstance(modalities, dict) and modalities.get("vision"):
        capabilities.append("vision")
    slots = ok(http.get("/slots"))
    count = len(slots) if isinstance(slots, list) else props["total_slots"]
    notes = (
        [] if isinstance(slots, list) else ["/slots is off (`--slots`): its load is read from /metrics only"]
    )
    if props.get("endpoint_metrics") is False:
        notes.append("/metrics is off (`--metrics`): only /slots says how busy it is")
    return Found(
        url=url,
        server="llama-server"
        + (f" {props['build_info']}" if isinstance(props.get("build_info"), str) else ""),
        kind="openai",
        worker_url=f"{url}/v1",
        models=(  # the one model it serves, in memory since it started
            FoundModel(
                str(name), n_ctx if isinstance(n_ctx, int) else None, tuple(capabilities), loaded=True
            ),
        ),
        slots=count,
        signals="llama.cpp",
        needs_key=listed is not None and listed[0] in (401, 403),  # llama-server --api-key
        notes=tuple(notes),
    )
