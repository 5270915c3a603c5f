"""Server settings (the callers' contract) and health settings (probes and circuits)."""

from __future__ import annotations

from collections.abc import Sequence

from interlock.diff.change import Change, changed_fields, named, show
from interlock.schema.plan import PlanCors, RoutingPlan

ANY = "*"

LIMITS = frozenset(
    (
        "header_timeout",
        "body_timeout",
        "stream_keepalive",
        "max_connections",
        "max_upstream_body_bytes",
        "max_stream_line_bytes",
    )
)
"""The server's protective limits (``changed_fields`` names a ``*_ms`` field without its suffix)."""


def server(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """Default alias, alias namespace, direct model calls, the resolved header, the body limit, the
    connection and upstream limits, and CORS."""
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
    out.extend(cors(old.cors, new.cors))
    out.extend(surfaces(old.surfaces, new.surfaces))
    return out


def surfaces(old: Sequence[str], new: Sequence[str]) -> list[Change]:
    """The API surfaces the gateway stops or starts serving (``server.surfaces``)."""
    out: list[Change] = []
    removed, added = [s for s in old if s not in new], [s for s in new if s not in old]
    if removed:
        summary = f"the gateway no longer serves the {_names(removed)} API (its paths answer 404)"
        out.append(Change("surfaces-removed", "surfaces", list(old), list(new), summary, unit="list"))
    if added:
        summary = f"the gateway now serves the {_names(added)} API"
        out.append(Change("surfaces-added", "surfaces", list(old), list(new), summary, unit="list"))
    return out


def _names(surfaces: Sequence[str]) -> str:
    return ", ".join(f"`{name}`" for name in surfaces)


def cors(old: PlanCors | None, new: PlanCors | None) -> list[Change]:
    """Origins and request headers as sets (`*` covers every other), credentials, the preflight cache.

    CORS turned off is every origin removed; turned on, every origin added (with credentials when on).
    """
    out: list[Change] = []
    before = old.allow_origins if old else []
    after = new.allow_origins if new else []
    removed, added = _lost(before, after), _lost(after, before)
    if removed:
        what = "CORS is off: " if new is None else ""
        summary = f"{what}browser apps at {_listed(removed)} may no longer call the gateway"
        out.append(Change("cors-origins-removed", "cors.allow_origins", before, after, summary, unit="list"))
    if added:
        what = "CORS is on: " if old is None else ""
        summary = f"{what}browser apps at {_listed(added)} may now call the gateway"
        out.append(Change("cors-origins-added", "cors.allow_origins", before, after, summary, unit="list"))
    if old is None or new is None:
        if new is not None and new.allow_credentials:
            summary = "browser apps may send credentials (cookies, HTTP auth) with their calls"
            out.append(
                Change(
                    "cors-credentials-allowed", "cors.allow_credentials", False, True, summary, unit="bool"
                )
            )
        return out
    if old.allow_credentials != new.allow_credentials:
        if new.allow_credentials:
            kind, summary = (
                "cors-credentials-allowed",
                "browser apps may now send credentials with their calls",
            )
        else:
            kind, summary = "cors-credentials-denied", "browser apps may no longer send credentials"
        out.append(
            Change(
                kind,
                "cors.allow_credentials",
                old.allow_credentials,
                new.allow_credentials,
                summary,
                unit="bool",
            )
        )
    for kind, headers, verb in (
        ("cors-headers-removed", _lost(old.allow_headers, new.allow_headers), "may no longer"),
        ("cors-headers-added", _lost(new.allow_headers, old.allow_headers), "may now"),
    ):
        if headers:
            summary = f"browser apps {verb} send the request headers {_listed(headers, 'any header')}"
            out.append(
                Change(kind, "cors.allow_headers", old.allow_headers, new.allow_headers, summary, unit="list")
            )
    if old.max_age_ms != new.max_age_ms:
        summary = f"browsers cache a CORS preflight answer for {show(new.max_age_ms, 'ms')} (was "
        summary += f"{show(old.max_age_ms, 'ms')})"
        out.append(
            Change("cors-max-age-changed", "cors.max_age", old.max_age_ms, new.max_age_ms, summary, unit="ms")
        )
    return out


def _lost(before: list[str], after: list[str]) -> list[str]:
    """Entries of ``before`` that ``after`` no longer allows (``*`` in ``after`` allows them all)."""
    if ANY in after:
        return []
    return [entry for entry in before if entry not in after]


def _listed(entries: list[str], any_one: str = "any origin") -> str:
    return ", ".join(any_one if e == ANY else f"`{e}`" for e in entries)


def health(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """Every probe and circuit-breaker setting, one change each."""
    out: list[Change] = []
    for setting, before, after, unit in changed_fields(base.health, head.health):
        summary = f"health `{setting}`: {show(before, unit)} → {show(after, unit)}"
        out.append(Change("health-changed", setting, before, after, summary, unit=unit))
    return out
