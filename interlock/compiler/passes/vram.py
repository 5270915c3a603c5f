"""VRAM fit: per worker and model, weights + KV cache at full slots against the profile's memory (warns).

weights = `models.<id>.size_gib`; KV cache = slots x context x `kv_bytes_per_token`, where slots is the
model's slot limit on the worker and context its limit there (`context_limits`, else the worker's or
the plan's default). A model without both facts, or a worker without known memory, is not checked.
"""

from __future__ import annotations

from interlock.compiler.context import CompileContext, Worker
from interlock.patterns import slot_limit

GIB = 1024**3


def vram(ctx: CompileContext) -> None:
    """Warn where a model at its slot count cannot fit the worker's memory; say what would."""
    models_by_provider: dict[str, set[str]] = {}
    for links in ctx.expanded.values():
        for link in links:
            provider, _, model = link.candidate.partition("/")
            models_by_provider.setdefault(provider, set()).add(model)
    for worker in ctx.workers.values():
        memory = _memory_gib(worker)
        if memory is None:
            continue
        for model in sorted(models_by_provider.get(worker.provider, ())):
            _check(ctx, worker, model, memory)


def _memory_gib(worker: Worker) -> float | None:
    hardware = worker.profile.hardware if worker.profile else None
    if hardware is None:
        return None
    return hardware.system_memory_gib if hardware.unified_memory else hardware.vram_gib


def _check(ctx: CompileContext, worker: Worker, model: str, memory: float) -> None:
    facts = ctx.models.get(f"{worker.provider}/{model}")
    if facts is None or facts.facts.size_gib is None or facts.facts.kv_bytes_per_token is None:
        return
    weights, per_token = facts.facts.size_gib, facts.facts.kv_bytes_per_token
    context = (
        worker.context_limits.get(model)
        or worker.default_context_tokens
        or ctx.preflight.default_context_tokens
    )
    if context is None or context < 1:
        return
    slots = slot_limit(worker.patterns, worker.max_concurrent, model)
    kv = slots * context * per_token / GIB
    if weights + kv <= memory:
        return
    free = (memory - weights) * GIB
    if free <= 0:
        advice = f"the weights alone ({weights:g} GiB) exceed it: use a smaller quantization or worker"
    else:
        fit_slots = int(free // (context * per_token))
        fit_context = int(free // (slots * per_token))
        options = []
        if fit_slots >= 1:
            options.append(f"{fit_slots} slot{'s' if fit_slots != 1 else ''} at {context} tokens")
        if fit_context >= 1:
            options.append(f"{slots} slot{'s' if slots != 1 else ''} at {fit_context} tokens")
        advice = "would fit: " + " or ".join(options) if options else "nothing useful fits"
    index = worker.entry.path[-1]
    ctx.sink.add(
        "IL705",
        ctx.span_of(worker.entry, "name"),
        f"`{model}` on worker `{worker.name}` needs about {weights + kv:.1f} GiB "
        f"({weights:g} GiB weights + {slots} x {context} tokens of KV cache = {kv:.1f} GiB), "
        f"more than its {memory:g} GiB",
        path=f"providers.{worker.provider}.workers[{index}]",
        value=model,
        hint=advice,
    )
