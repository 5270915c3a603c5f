"""Homes, compiled: what each model takes on each worker, how wanted it is, and where it stays loaded.

What a model takes on a worker (its *footprint*) is the one rule the VRAM fit check (``passes/vram``) and
placement share: weights (`models.<id>.size_gib`) plus, where `kv_bytes_per_token` is declared, the KV
cache at full load (the model's slots there x its context there). A worker's *budget* is its memory
(`memory_gib`, else its profile's) times `routing.avoid_vram_percent`: homes never fill a worker past
the point where worker choice stops loading models on it.

How wanted a model is, before any traffic is seen: the earliest place it holds in any alias's expanded
chain (a first candidate serves every request of its alias; a last one only what fell through), then
the number of aliases that use it, then its name. The runtime re-ranks by the traffic it sees
(``runtime/fleet/placement.py``); both pack with ``interlock.common.packing.pack``.

Only providers whose workers load models on demand and report them (``ProviderKind.live_facts``: Ollama)
are placed; an OpenAI-compatible server loads the one model it was started with.
"""

from __future__ import annotations

import math

from interlock.common.kinds import KINDS
from interlock.common.packing import Want, pack
from interlock.common.patterns import slot_limit
from interlock.compiler.context import CompileContext, Worker
from interlock.compiler.placed import Footprint, Placed, Ranked
from interlock.schema.durations import parse_duration

GIB = 1024**3
FOREVER = -1
"""``keep_alive`` as Ollama reads a negative number of seconds: never unload."""


def footprint_of(ctx: CompileContext, worker: Worker, model: str) -> Footprint | None:
    """``model`` at its slot count on ``worker``; None when its size is not declared."""
    facts = ctx.models.get(f"{worker.provider}/{model}")
    if facts is None or facts.facts.size_gib is None:
        return None
    context = (
        worker.context_limits.get(model)
        or worker.default_context_tokens
        or ctx.preflight.default_context_tokens
    )
    slots = slot_limit(worker.patterns, worker.max_concurrent, model)
    per_token = facts.facts.kv_bytes_per_token
    kv = slots * context * per_token / GIB if per_token is not None and context else None
    return Footprint(facts.facts.size_gib, kv, slots, context)


def budget_of(ctx: CompileContext, worker: Worker) -> float | None:
    memory = worker.memory()
    return None if memory is None else round(memory * ctx.routing.avoid_vram_percent / 100, 3)


def keep_alive_seconds(text: str) -> int | None:
    """``forever`` -> -1; a duration -> whole seconds, rounded up; None when neither (or zero)."""
    if text.strip() == "forever":
        return FOREVER
    try:
        ms = parse_duration(text)
    except ValueError:
        return None
    return math.ceil(ms / 1000) if ms > 0 else None


def place(ctx: CompileContext) -> Placed:
    """Rank the models of every placed provider and pack those whose size is declared."""
    placed = {
        name for name, p in ctx.providers.items() if (kind := KINDS.get(p.section.kind)) and kind.live_facts
    }
    workers = [w for w in ctx.workers.values() if w.provider in placed]
    position: dict[str, int] = {}
    aliases: dict[str, int] = {}
    for links in ctx.expanded.values():
        for index, link in enumerate(links):
            if ctx.provider_of(link.candidate) not in placed:
                continue
            position[link.candidate] = min(position.get(link.candidate, index), index)
            aliases[link.candidate] = aliases.get(link.candidate, 0) + 1
    ranked = []
    for candidate in sorted(position, key=lambda c: (position[c], -aliases[c], c)):
        provider, _, model = candidate.partition("/")
        feet = {}
        for worker in workers:
            if worker.provider == provider and (foot := footprint_of(ctx, worker, model)) is not None:
                feet[worker.name] = foot
        ranked.append(Ranked(candidate, provider, model, position[candidate], aliases[candidate], feet))
    budgets = {w.name: budget_of(ctx, w) for w in workers}
    known = {name: gib for name, gib in budgets.items() if gib is not None}
    wants = [
        Want(r.candidate, {w: f.total for w, f in r.footprint.items() if w in known})
        for r in ranked
        if r.footprint
    ]
    section = ctx.routing.placement
    return Placed(
        budgets, tuple(ranked), pack(known, wants), section.warm, keep_alive_seconds(section.keep_alive)
    )
