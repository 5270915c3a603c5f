"""llama.cpp's ``llama-server``: ``GET /props`` (slots, the window of a slot, what its chat template can
do, modalities), ``GET /v1/models`` (the model's name), ``GET /slots`` (when on: the slots themselves),
``POST /apply-template`` (what the chat template does with a request's tools; nothing is generated).

An agent sends tools with every request, and llama-server accepts them whatever its chat template says
(``/props``' ``supports_tools`` is false for Gemma's and SmolLM2's), so the model is declared with
``tools`` and a remark saying what the template does with them; ``thinking`` too where the template
writes an earlier turn's reasoning back (``supports_preserve_reasoning``: a thinking model's), so its
reasoning contract is ``reasoning_content``. Without ``--alias`` the server names its
model by the ``.gguf`` file's path, and answers any name: the file's name is used instead. The window
is a slot's: llama-server splits ``--ctx-size`` over ``--parallel`` slots.
"""

from __future__ import annotations

from typing import Any

from interlock.common.bounds import MAX_SLOTS, window
from interlock.discover.base import Found, FoundModel, Http, model_name, ok, said, slots

TOOL = "interlock_init_probe"
"""The tool named in the ``/apply-template`` request: found in the prompt, the template wrote the tools."""

_TEMPLATE_PROBE = {
    "messages": [{"role": "user", "content": "hi"}],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": TOOL,
                "description": "What the chat template does with a tool.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ],
}


def probe(http: Http, url: str) -> Found | None:
    props = ok(http.get("/props"))
    if not isinstance(props, dict) or not isinstance(props.get("total_slots"), int):
        return None
    listed = http.get("/v1/models")
    live = ok(http.get("/slots"))
    count = slots(len(live)) if isinstance(live, list) else slots(props["total_slots"])
    notes = (
        [] if isinstance(live, list) else ["/slots is off (`--slots`): its load is read from /metrics only"]
    )
    if count is None:
        notes.append(f"its slot count is not one from 1 to {MAX_SLOTS}: `max_concurrent` is not written")
    if props.get("endpoint_metrics") is False:
        notes.append("/metrics is off (`--metrics`): only /slots says how busy it is")
    build = props.get("build_info")
    name, why = _name(ok(listed), props)
    if why:
        notes.append(why)
    tools_why = _tools(http, props)
    capabilities = ["completion", "tools"]
    thinks = _thinks(props)
    if thinks:
        capabilities.append("thinking")
    modalities = props.get("modalities")
    if isinstance(modalities, dict) and modalities.get("vision") is True:
        capabilities.append("vision")
    context, context_why = _window(props, live, count)
    said_of_capabilities = "; ".join(why for why in (tools_why, thinks) if why)
    remarks = [("capabilities", said_of_capabilities)] if said_of_capabilities else []
    remarks += [("context_tokens", context_why)] if context_why else []
    return Found(
        url=url,
        server="llama-server" + (f" {said(build)}" if isinstance(build, str) else ""),
        kind="openai",
        worker_url=f"{url}/v1",
        models=(  # the one model it serves, in memory since it started
            FoundModel(name, context, tuple(capabilities), loaded=True, remarks=tuple(remarks)),
        ),
        slots=count,
        signals="llama.cpp",
        needs_key=listed is not None and listed[0] in (401, 403),  # llama-server --api-key
        notes=tuple(notes),
    )


def _name(models: Any, props: dict[str, Any]) -> tuple[str, str | None]:
    """The model's name, and a note when it is not the one the server lists."""
    data = models.get("data") if isinstance(models, dict) else None
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    listed = model_name(first.get("id")) or model_name(props.get("model_alias"))
    if listed is None:
        return "default", "its model has no name usable here: `default` is written (it answers any name)"
    if "/" not in listed and "\\" not in listed and not listed.lower().endswith(".gguf"):
        return listed, None
    stem = listed.replace("\\", "/").rsplit("/", 1)[-1]
    readable = model_name(stem[: -len(".gguf")] if stem.lower().endswith(".gguf") else stem)
    if readable is None:
        return listed, None
    return readable, (
        f"it names its model by its file ({said(listed)}) and answers any name: `{readable}` is written "
        "(`--alias NAME` names it)"
    )


def _tools(http: Http, props: dict[str, Any]) -> str | None:
    """What the chat template does with a request's tools, when it is not what /props says it does."""
    caps = props.get("chat_template_caps")
    if isinstance(caps, dict) and caps.get("supports_tools") is True:
        return None  # the template writes them: nothing to remark
    rendered = ok(http.post("/apply-template", _TEMPLATE_PROBE))
    prompt = rendered.get("prompt") if isinstance(rendered, dict) else None
    if not isinstance(prompt, str):
        return (
            "tools: llama-server accepts them, though /props says its chat template has no tool support; "
            "what the model sees of them is unknown (no /apply-template)"
        )
    if TOOL in prompt:
        return (
            "tools: its chat template has no tool support, and llama-server writes the tool schemas into "
            "the prompt itself (/apply-template): a small model may still answer in text"
        )
    return (
        "tools: llama-server accepts them, but its chat template leaves them out of the prompt "
        "(/apply-template): the model never sees the tools and answers in text"
    )


def _thinks(props: dict[str, Any]) -> str | None:
    """The remark for ``thinking`` when the chat template writes an earlier turn's ``reasoning_content``
    back into the prompt (``/props``: ``supports_preserve_reasoning``), a thinking model's template; None
    otherwise (SmolLM2's and Gemma's). Its reasoning contract is then ``reasoning_content``."""
    caps = props.get("chat_template_caps")
    if not isinstance(caps, dict) or caps.get("supports_preserve_reasoning") is not True:
        return None
    return "thinking: its template writes reasoning_content back (/props: supports_preserve_reasoning)"


def _window(props: dict[str, Any], live: Any, count: int | None) -> tuple[int | None, str | None]:
    """The window of one slot (the smallest any source says), and the remark on how it was split."""
    settings = props.get("default_generation_settings")
    said_windows = [window(settings.get("n_ctx")) if isinstance(settings, dict) else None]
    if isinstance(live, list):
        said_windows += [window(s.get("n_ctx")) for s in live if isinstance(s, dict)]
    known = [w for w in said_windows if w is not None]
    if not known:
        return None, None
    per_slot = min(known)
    if count is None or count <= 1:
        return per_slot, None
    return (
        per_slot,
        f"a slot's, of {count}: llama-server splits --ctx-size over --parallel (not with --kv-unified)",
    )
