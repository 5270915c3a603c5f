"""Preflight settings: the mode (what is skipped or only reported) and the estimate's parameters."""

from __future__ import annotations

from interlock.diff.change import Change, changed_fields, show
from interlock.schema.plan import RoutingPlan

WHAT = {
    "enforce": "candidates that cannot serve a request are skipped (400 when none can)",
    "observe": "misfits are only reported (header, metric, log); routing is as without preflight",
    "off": "nothing is checked before calling a candidate",
}


def preflight(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """The mode as one change (it decides whether requests are skipped); every other setting as one each."""
    out: list[Change] = []
    for setting, before, after, unit in changed_fields(base.preflight, head.preflight):
        if setting == "mode":
            summary = f"preflight mode `{before}` → `{after}`: {WHAT.get(after, after)}"
            out.append(Change("preflight-mode-changed", "mode", before, after, summary))
            continue
        summary = f"preflight `{setting}`: {show(before, unit)} → {show(after, unit)}"
        out.append(Change("preflight-changed", setting, before, after, summary, unit=unit))
    return out
