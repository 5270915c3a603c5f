"""Server settings (the callers' contract) and health settings (probes and circuits)."""

from __future__ import annotations

from interlock.diff.change import Change, changed_fields, named, show
from interlock.schema.plan import RoutingPlan

LIMITS = frozenset(
    ("header_timeout", "body_timeout", "max_connections", "max_upstream_body_bytes", "max_stream_line_bytes")
)
"""The server's protective limits (``changed_fields`` names a ``*_ms`` field without its suffix)."""


def server(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """Default alias, alias namespace, direct model calls, the resolved header, the body limit, and the
    connection and upstream limits."""
    old, new = base.server, head.server
    out: list[Change] = []
    if old.default_alias != new.default_alias:
        target = named(new.default_alias) if new.default_alias else "an error (no default alias)"
        summary = f"requests without a `model` now go to {target} (was {named(old.default_alias)})"
        out.append(
            Change("default-alias-changed", "default_alias", old.default_alias, new.default_alias, summary)
        )
    if old.alias_namespace != new.alias_namespace:
        summary = (
            f"the alias namespace is now {named(new.alias_namespace)} (was {named(old.alias_namespace)})"
        )
        out.append(
            Change(
                "alias-namespace-changed",
                "alias_namespace",
                old.alias_namespace,
                new.alias_namespace,
                summary,
            )
        )
    if old.direct_models and not new.direct_models:
        summary = "callers may no longer send raw `provider/model` names; only aliases are accepted"
        out.append(Change("direct-models-denied", "direct_models", True, False, summary, unit="bool"))
    elif new.direct_models and not old.direct_models:
        summary = "callers may now send raw `provider/model` names, bypassing the aliases"
        out.append(Change("direct-models-allowed", "direct_models", False, True, summary, unit="bool"))
    if old.resolved_header != new.resolved_header:
        summary = f"the answering model is now named in `{new.resolved_header}` (was `{old.resolved_header}`)"
        out.append(
            Change(
                "resolved-header-changed",
                "resolved_header",
                old.resolved_header,
                new.resolved_header,
                summary,
            )
        )
    if old.max_body_bytes != new.max_body_bytes:
        summary = f"largest accepted request body: {old.max_body_bytes} → {new.max_body_bytes} bytes"
        out.append(
            Change("max-body-changed", "max_body_bytes", old.max_body_bytes, new.max_body_bytes, summary)
        )
    for setting, before, after, unit in changed_fields(old, new):
        if setting in LIMITS:
            summary = f"server `{setting}`: {show(before, unit)} → {show(after, unit)}"
            out.append(Change("server-limit-changed", setting, before, after, summary, unit=unit))
    return out


def health(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """Every probe and circuit-breaker setting, one change each."""
    out: list[Change] = []
    for setting, before, after, unit in changed_fields(base.health, head.health):
        summary = f"health `{setting}`: {show(before, unit)} → {show(after, unit)}"
        out.append(Change("health-changed", setting, before, after, summary, unit=unit))
    return out
