"""The Prometheus alerting rules a plan compiles to (`interlock deploy prometheus-rules`): what pages whom."""

from __future__ import annotations

from interlock.deploy.prometheus import alert_ids, rules
from interlock.diff.change import Change
from interlock.schema.plan import RoutingPlan


def alerts(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """One change when any rule is added, removed or changed: the rule file must be regenerated."""
    old, new = alert_ids(rules(base)), alert_ids(rules(head))
    removed = sorted(old.keys() - new.keys())
    added = sorted(new.keys() - old.keys())
    changed = sorted(name for name in old.keys() & new.keys() if old[name] != new[name])
    if not (removed or added or changed):
        return []
    parts = [
        f"{len(names)} {what} ({', '.join(f'`{n}`' for n in names)})"
        for what, names in (("added", added), ("removed", removed), ("changed", changed))
        if names
    ]
    summary = (
        f"Prometheus alerts: {'; '.join(parts)}: regenerate the rules (`interlock deploy prometheus-rules`)"
    )
    return [
        Change("alerts-changed", "prometheus-rules", removed + changed, added + changed, summary, unit="list")
    ]
