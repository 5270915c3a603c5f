"""Placement: which models stay loaded where, and whether they are warmed (``routing.placement``).

What placement derives from other parts of the plan is not reported twice: a model's rank (its chain
positions: alias changes) and the models left without a home (the homes, compared here). A worker
added or removed is the workers' change; what placement keeps on the workers present in both plans,
their budgets and the models' declared footprints are compared here.
"""

from __future__ import annotations

from interlock.diff.change import Change, show
from interlock.schema.plan import RoutingPlan


def placement(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """One change per worker whose homes or budget change, per warm-up setting, per model whose footprint
    changes; they change which models a worker keeps loaded (latency, not which model answers)."""
    old, new = base.placement, head.placement
    out: list[Change] = []
    for setting in ("warm", "keep_alive_s"):
        before, after = getattr(old, setting), getattr(new, setting)
        if before != after:
            summary = f"placement `{setting}`: {show(before, None)} → {show(after, None)}"
            out.append(Change("placement-changed", setting, before, after, summary))
    for worker in sorted(set(base.workers) & set(head.workers)):
        homes = (old.homes.get(worker), new.homes.get(worker))
        if homes[0] != homes[1]:
            summary = f"models kept loaded on `{worker}`: {show(homes[0], 'list')} → {show(homes[1], 'list')}"
            out.append(Change("placement-changed", worker, *homes, summary, field="homes", unit="list"))
        budget = (old.budgets_gib.get(worker), new.budgets_gib.get(worker))
        if budget[0] != budget[1]:
            summary = f"placement budget of `{worker}`: {show(budget[0], None)} → {show(budget[1], None)} GiB"
            out.append(Change("placement-changed", worker, *budget, summary, field="budget_gib"))
    feet = (
        {m.candidate: m.footprint_gib for m in old.models},
        {m.candidate: m.footprint_gib for m in new.models},
    )
    for candidate in sorted(set(feet[0]) & set(feet[1])):
        before, after = feet[0][candidate], feet[1][candidate]
        if before != after:
            summary = (
                f"footprint of `{candidate}` (GiB per worker): {show(before, None)} → {show(after, None)}"
            )
            out.append(Change("placement-changed", candidate, before, after, summary, field="footprint_gib"))
    return out
