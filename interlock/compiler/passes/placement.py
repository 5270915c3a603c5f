"""Placement: workers' memory + models' sizes -> which models stay loaded where (warns where some cannot).

The packing itself is ``compiler.homes.place`` (the rule: ``interlock.common.packing``); this pass checks
`routing.placement` and says what the packing left out: a provider whose declared models cannot all stay
loaded (IL211), an alias whose first candidate has no home (IL212), and, with warm-up on, what placement
cannot see (IL214: a worker's memory; IL215: a model's size, which the runtime then learns).
"""

from __future__ import annotations

from interlock.compiler.context import CompileContext, Link
from interlock.compiler.diagnostics import Span
from interlock.compiler.homes import place
from interlock.compiler.placed import Placed


def placement(ctx: CompileContext) -> None:
    """Pack the declared models into the workers' memory; warn about what has no home."""
    placed = place(ctx)
    ctx.placement = placed
    section = ctx.routing.placement
    if placed.keep_alive_s is None and not ctx.is_broken("routing.placement.keep_alive"):
        ctx.sink.add(
            "IL213",
            _routing_span(ctx, "placement", "keep_alive"),
            f"`routing.placement.keep_alive` must be `forever` or a positive duration, not "
            f"`{section.keep_alive}`",
            path="routing.placement.keep_alive",
            value=section.keep_alive,
            hint="`forever` (Ollama's -1: never unload) or how long a placed model stays loaded idle, "
            "e.g. 30m or 24h",
        )
    left_out = _left_out(ctx, placed)
    _overcommit(ctx, placed, left_out)
    _primaries(ctx, {c for missing in left_out.values() for c in missing})
    if section.warm:
        _unknowns(ctx, placed)


def _routing_span(ctx: CompileContext, *key: str) -> Span:
    entry = ctx.sources.singletons.get("routing")
    if entry is None:
        main = ctx.sources.main
        return Span(main.file if main else "<config>")
    return ctx.span_of(entry, *key)


def _left_out(ctx: CompileContext, placed: Placed) -> dict[str, list[str]]:
    """Per provider, its sized models without a home that the VRAM fit check (IL705) does not already
    report as too big for every worker."""
    out: dict[str, list[str]] = {}
    for ranked in placed.ranked:
        if ranked.candidate not in placed.packing.homeless:
            continue
        too_big = all(
            foot.kv is not None and (memory := ctx.workers[w].memory()) is not None and foot.total > memory
            for w, foot in ranked.footprint.items()
        )
        if not too_big:
            out.setdefault(ranked.provider, []).append(ranked.candidate)
    return out


def _overcommit(ctx: CompileContext, placed: Placed, left_out: dict[str, list[str]]) -> None:
    for provider, missing in left_out.items():
        workers = [w for w in ctx.workers.values() if w.provider == provider]
        need = sum(
            max(foot.total for foot in r.footprint.values())
            for r in placed.ranked
            if r.provider == provider and r.footprint
        )
        held = sum(gib for w in workers if (gib := placed.budgets.get(w.name)) is not None)
        names = ", ".join(f"`{c}`" for c in missing)
        ctx.sink.add(
            "IL211",
            ctx.providers[provider].entry.key_span,
            f"the models of provider `{provider}` need about {need:.1f} GiB to all stay loaded; its workers "
            f"hold {held:.1f} GiB ({ctx.routing.avoid_vram_percent:g}% of their memory): {names} "
            f"{'has' if len(missing) == 1 else 'have'} no home",
            path=f"providers.{provider}",
            value=missing,
            hint="a request for a model without a home loads it and evicts another; give the workers more "
            "memory (`memory_gib`), add a worker, or use smaller models, fewer slots or shorter contexts",
        )


def _primaries(ctx: CompileContext, homeless: set[str]) -> None:
    for name, links in ctx.expanded.items():
        if not links or links[0].candidate not in homeless:
            continue
        first = links[0]
        ctx.sink.add(
            "IL212",
            first.hop.span,
            f"alias `{name}`'s first candidate `{first.candidate}` has no worker to stay loaded on: every "
            "request to the alias may wait for a model load",
            path=first.hop.path,
            value=first.candidate,
            hint="free memory for it (see IL211), or put a model that has a home first in the chain",
        )


def _unknowns(ctx: CompileContext, placed: Placed) -> None:
    for worker in ctx.workers.values():
        if worker.name in placed.budgets and placed.budgets[worker.name] is None:
            index = worker.entry.path[-1]
            ctx.sink.add(
                "IL214",
                ctx.span_of(worker.entry, "name"),
                f"worker `{worker.name}`'s memory is unknown: no model is placed or warmed there",
                path=f"providers.{worker.provider}.workers[{index}]",
                value=worker.name,
                hint="set `memory_gib` on the worker, or a `profile` whose hardware states `vram_gib`",
            )
    first_use: dict[str, Link] = {}
    for links in ctx.expanded.values():
        for link in links:
            first_use.setdefault(link.candidate, link)
    for ranked in placed.ranked:
        if ranked.footprint or not any(placed.budgets.get(w) for w in _workers_of(ctx, ranked.provider)):
            continue
        link = first_use[ranked.candidate]
        ctx.sink.add(
            "IL215",
            link.hop.span,
            f"`{ranked.candidate}` has no declared size: it is placed only once a worker reports it "
            "(`/api/tags`, `/api/ps`)",
            path=link.hop.path,
            value=ranked.candidate,
            hint=f"declare `models.{ranked.candidate}.size_gib` to place it before traffic",
        )


def _workers_of(ctx: CompileContext, provider: str) -> list[str]:
    return [w.name for w in ctx.workers.values() if w.provider == provider]
