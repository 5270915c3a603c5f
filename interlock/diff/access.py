"""Access: `server.auth`, tenants and keys (ACLs, secrets, limits) and the prices credits are kept in.

Turning auth on or up, removing a tenant or a key, changing a key's hash, narrowing an ACL and
revoking a key's `operator` are breaking: a caller that worked before is refused. Granting `operator`
is routing, like a wider ACL (a key may read more: the fleet's state); but the first operator key also
shuts every other key out of the operator routes, and that is reported as a breaking revocation. ACL
patterns are compared as sets (an unset `allowed` is `*`); any pattern dropped from `allowed` or added
to `denied` narrows it.
"""

from __future__ import annotations

from interlock.common.pattern_text import parse_match
from interlock.diff.change import Change, changed_fields, show
from interlock.schema.plan import PlanAccess, PlanKey, PlanLimits, PlanTenant, RoutingPlan

_STRICTNESS = {"off": 0, "optional": 1, "required": 2}
_ACL = ("allowed", "denied")
_QUEUE = ("weight", "priority", "priority_header")


def access(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """Auth mode, then each tenant and key by name, then prices."""
    out: list[Change] = []
    old_auth, new_auth = base.server.auth, head.server.auth
    if old_auth != new_auth:
        tighter = _STRICTNESS[new_auth] > _STRICTNESS[old_auth]
        summary = f"caller keys (`server.auth`): {old_auth} → {new_auth}" + (
            "; callers without a valid key may now be refused" if tighter else ""
        )
        kind = "auth-tightened" if tighter else "auth-loosened"
        out.append(Change(kind, "server.auth", old_auth, new_auth, summary))
    old, new = base.access, head.access
    out.extend(_callers("tenants", old, new))
    out.extend(_callers("keys", old, new))
    out.extend(_operators(old, new))
    out.extend(_prices(old, new))
    return out


def _callers(section: str, old: PlanAccess, new: PlanAccess) -> list[Change]:
    out: list[Change] = []
    before, after = getattr(old, section), getattr(new, section)
    what = "tenant" if section == "tenants" else "key"
    for name in sorted(before.keys() - after.keys()):
        summary = f"{what} `{name}` is removed: its callers will be refused"
        out.append(Change("caller-removed", f"{section}.{name}", name, None, summary))
    for name in sorted(after.keys() - before.keys()):
        out.append(Change("caller-added", f"{section}.{name}", None, name, f"{what} `{name}` is added"))
    for name in sorted(before.keys() & after.keys()):
        a, b = before[name], after[name]
        subject = f"{section}.{name}"
        if a.description != b.description:
            summary = f"{what} `{name}`: description changed"
            out.append(Change("caller-description-changed", subject, a.description, b.description, summary))
        if section == "keys":
            out.extend(_key(subject, name, a.tenant, b.tenant, (a.key_env, a.hash), (b.key_env, b.hash)))
        out.extend(_limits(subject, what, name, a.limits, b.limits))
        out.extend(_queue(subject, what, name, a, b))
    return out


def _queue(
    subject: str, what: str, name: str, old: PlanTenant | PlanKey, new: PlanTenant | PlanKey
) -> list[Change]:
    """Where the caller's requests wait when a model is full: the tenant's weight, the priority class,
    whether a key may choose it per request."""
    out: list[Change] = []
    for setting in _QUEUE:
        if setting not in type(old).model_fields:
            continue
        before, after = getattr(old, setting), getattr(new, setting)
        if before != after:
            summary = f"{what} `{name}` `{setting}`: {show(before, None)} → {show(after, None)}"
            out.append(Change("caller-queue-changed", subject, before, after, summary, field=setting))
    return out


def _key(
    subject: str,
    name: str,
    old_tenant: str,
    new_tenant: str,
    old_secret: tuple[str | None, str | None],
    new_secret: tuple[str | None, str | None],
) -> list[Change]:
    out: list[Change] = []
    if old_tenant != new_tenant:
        summary = f"key `{name}` moves from tenant `{old_tenant}` to `{new_tenant}`"
        out.append(Change("key-tenant-changed", subject, old_tenant, new_tenant, summary, field="tenant"))
    if old_secret != new_secret and (old_secret[0] or "hash") == (new_secret[0] or "hash"):
        # another variable, or `key_env` <-> `hash`, is the credentials section's `key-secret-source-changed`
        summary = f"key `{name}` has a new secret: callers still sending the old one will be refused"
        # never the values: a hash is not a secret, but it has no business in a review either
        before = "key_env" if old_secret[0] else "hash"
        after = "key_env" if new_secret[0] else "hash"
        out.append(Change("key-secret-changed", subject, before, after, summary, field="secret"))
    return out


def _operators(old: PlanAccess, new: PlanAccess) -> list[Change]:
    """Each kept key whose `operator` flag changed, and, when the first operator appears, the other
    keys that lose the operator routes (any valid key read them while no key was an operator)."""
    out: list[Change] = []
    before = {name for name, key in old.keys.items() if key.operator}
    after = {name for name, key in new.keys.items() if key.operator}
    for name in sorted(after - before):  # a key added as an operator too: a reviewer should see it
        summary = f"key `{name}` is an operator: it may read the fleet's state (`/ui`, `/v1/health`, ...)"
        out.append(Change("operator-granted", f"keys.{name}", False, True, summary))
    for name in sorted((before - after) & new.keys.keys()):  # a removed key is `caller-removed`
        summary = f"key `{name}` is no longer an operator: `/ui`, `/v1/health`, ... will refuse it"
        out.append(Change("operator-revoked", f"keys.{name}", True, False, summary))
    if after and not before:
        shut = sorted(new.keys.keys() & old.keys.keys() - after)
        if shut:
            shown = ", ".join(f"`{name}`" for name in shut)
            summary = f"the first operator key is declared: {shown} will get 403 on `/ui`, `/v1/health`, ..."
            out.append(Change("operator-revoked", "keys", None, shut, summary, unit="list"))
    return out


def _limits(subject: str, what: str, name: str, old: PlanLimits, new: PlanLimits) -> list[Change]:
    out: list[Change] = []
    narrowed: list[str] = []
    widened: list[str] = []
    for acl in _ACL:
        before = _patterns(getattr(old, acl), acl)
        after = _patterns(getattr(new, acl), acl)
        removed = sorted(p for p in before - after if not _covered(p, after))
        added = sorted(p for p in after - before if not _covered(p, before))
        lost, gained = (removed, added) if acl == "allowed" else (added, removed)
        narrowed += [f"{acl} {'-' if acl == 'allowed' else '+'}{p}" for p in lost]
        widened += [f"{acl} {'+' if acl == 'allowed' else '-'}{p}" for p in gained]
    if narrowed:
        summary = f"{what} `{name}` may call less: " + ", ".join(narrowed)
        out.append(Change("acl-tightened", subject, None, narrowed, summary, field="acl", unit="list"))
    if widened:
        summary = f"{what} `{name}` may call more: " + ", ".join(widened)
        out.append(Change("acl-loosened", subject, None, widened, summary, field="acl", unit="list"))
    for setting, before, after, unit in changed_fields(old, new):
        if setting in _ACL:
            continue
        summary = f"{what} `{name}` `{setting}`: {show(before, unit)} → {show(after, unit)}"
        out.append(Change("caller-limit-changed", subject, before, after, summary, field=setting, unit=unit))
    return out


def _covered(pattern: str, others: set[str]) -> bool:
    """Whether one of ``others`` matches every name ``pattern`` does (so swapping them changes nothing)."""
    row = parse_match(pattern)
    for other in others:
        wider = parse_match(other)
        if row is None or wider is None:
            continue
        if wider.pattern == row.pattern or (wider.match != "exact" and row.prefix.startswith(wider.prefix)):
            return True
    return False


def _patterns(rows: object, acl: str) -> set[str]:
    if rows is None:
        return {"*"} if acl == "allowed" else set()
    return {row.pattern for row in rows}  # type: ignore[attr-defined]


def _prices(old: PlanAccess, new: PlanAccess) -> list[Change]:
    out: list[Change] = []
    if old.currency != new.currency:
        summary = f"prices are now in {new.currency} (were in {old.currency})"
        out.append(Change("price-changed", "pricing.currency", old.currency, new.currency, summary))
    for cid in sorted(old.prices.keys() | new.prices.keys()):
        a, b = old.prices.get(cid), new.prices.get(cid)
        if a == b:
            continue
        before = None if a is None else a.model_dump()
        after = None if b is None else b.model_dump()
        summary = f"price of `{cid}` per million tokens: {show(before, None)} → {show(after, None)}"
        out.append(Change("price-changed", f"pricing.{cid}", before, after, summary))
    return out
