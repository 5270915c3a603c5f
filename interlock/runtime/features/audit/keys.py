"""Key and budget changes a reload brings: the audit's ``key_*`` and ``credit_change`` lines.

Caller keys and budgets live in the plan, so an operator changes them by editing the configuration and
reloading. This compares the two plans' ``access`` sections (done once per reload, off the request path)
and says, per key and tenant, what changed, in words: never a secret, a hash or a variable's value.
"""

from __future__ import annotations

from collections.abc import Iterator

from interlock.runtime.features.audit.events import Scalar
from interlock.schema.plan import PlanAccess, PlanKey, PlanLimits

Change = tuple[str, dict[str, Scalar]]


def access_changes(old: PlanAccess, new: PlanAccess, actor: str = "reload") -> Iterator[Change]:
    """``(action, fields)`` for every key added, removed or changed, and every budget changed."""
    for key_id in sorted(new.keys.keys() - old.keys.keys()):
        yield "key_added", {"key_id": key_id, "tenant": new.keys[key_id].tenant, "actor": actor}
    for key_id in sorted(old.keys.keys() - new.keys.keys()):
        yield "key_removed", {"key_id": key_id, "tenant": old.keys[key_id].tenant, "actor": actor}
    for key_id in sorted(old.keys.keys() & new.keys.keys()):
        before, after = old.keys[key_id], new.keys[key_id]
        what = _key_differences(before, after)
        if what:
            fields: dict[str, Scalar] = {"key_id": key_id, "tenant": after.tenant, "actor": actor}
            yield "key_changed", {**fields, "change": ", ".join(what)}
        budget = _budget(before.limits, after.limits)
        if budget is not None:
            yield "credit_change", {"key_id": key_id, "tenant": after.tenant, "actor": actor, **budget}
    for name in sorted(old.tenants.keys() & new.tenants.keys()):
        budget = _budget(old.tenants[name].limits, new.tenants[name].limits)
        if budget is not None:
            yield "credit_change", {"tenant": name, "actor": actor, **budget}


def _key_differences(before: PlanKey, after: PlanKey) -> list[str]:
    what = []
    if (before.key_env, before.hash) != (after.key_env, after.hash):
        what.append("secret replaced")
    if before.tenant != after.tenant:
        what.append(f"tenant {before.tenant} -> {after.tenant}")
    if before.operator != after.operator:
        what.append("operator granted" if after.operator else "operator revoked")
    if (before.limits.allowed, before.limits.denied) != (after.limits.allowed, after.limits.denied):
        what.append("models allowed or denied")
    rates = ("requests_per_minute", "tokens_per_minute", "max_concurrent")
    for name in rates:
        if getattr(before.limits, name) != getattr(after.limits, name):
            what.append(f"{name} {getattr(before.limits, name)} -> {getattr(after.limits, name)}")
    return what


def _budget(before: PlanLimits, after: PlanLimits) -> dict[str, Scalar] | None:
    """A budget (``credits``, 0 = unlimited) set, changed or lifted; None when it stayed."""
    if (before.credits, before.credits_unit) == (after.credits, after.credits_unit):
        return None
    return {
        "unit": after.credits_unit,
        "reason": f"budget {_shown(before)} -> {_shown(after)}",
    }


def _shown(limits: PlanLimits) -> str:
    return "unlimited" if limits.credits == 0 else f"{limits.credits:g} {limits.credits_unit}"
