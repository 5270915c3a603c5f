"""Routing settings: worker-choice weights, the VRAM limit for loads, learned speeds, saturation policy."""

from __future__ import annotations

from interlock.diff.change import Change, changed_fields, show
from interlock.schema.plan import RoutingPlan


def routing(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """One change per setting (each weight on its own); they all change which worker answers."""
    out: list[Change] = []
    old, new = base.routing, head.routing
    for weight, before, after, unit in changed_fields(old.weights, new.weights):
        summary = f"routing weight `{weight}`: {show(before, unit)} → {show(after, unit)}"
        out.append(Change("routing-changed", f"weights.{weight}", before, after, summary, unit=unit))
    for setting, before, after, unit in changed_fields(old.sticky, new.sticky):
        summary = f"sticky sessions `{setting}`: {show(before, unit)} → {show(after, unit)}"
        out.append(Change("routing-changed", f"sticky.{setting}", before, after, summary, unit=unit))
    for setting, before, after, unit in changed_fields(old, new):
        if setting in ("weights", "sticky"):
            continue
        summary = f"routing `{setting}`: {show(before, unit)} → {show(after, unit)}"
        out.append(Change("routing-changed", setting, before, after, summary, unit=unit))
    return out
