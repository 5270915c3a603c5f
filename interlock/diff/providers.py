"""Providers: added or removed, kind, base URL, credential variable name, probe, Responses API, timeouts,
retries, workers."""

from __future__ import annotations

from interlock.common.kinds import KINDS
from interlock.diff.aliases import reordered
from interlock.diff.change import Change, changed_fields, named, show
from interlock.schema.plan import PlanProvider, RoutingPlan


def providers(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """Compare every provider of ``base`` with the one of the same name in ``head``."""
    out: list[Change] = []
    for name in sorted(base.providers.keys() | head.providers.keys()):
        old, new = base.providers.get(name), head.providers.get(name)
        if old is None and new is not None:
            summary = f"new provider `{name}` ({_where(new)})"
            out.append(Change("provider-added", name, None, new.kind, summary))
        elif new is None and old is not None:
            summary = f"provider `{name}` ({_where(old)}) is removed"
            out.append(Change("provider-removed", name, old.kind, None, summary))
        elif old is not None and new is not None:
            out.extend(_provider(name, old, new))
    return out


def _where(provider: PlanProvider) -> str:
    if KINDS[provider.kind].shape == "workers":
        return f"{provider.kind}, workers: {show(provider.workers, 'list')}"
    return f"{provider.kind} at {provider.base_url}"


def _provider(name: str, old: PlanProvider, new: PlanProvider) -> list[Change]:
    out: list[Change] = []
    if old.kind != new.kind:
        summary = f"provider `{name}` is now of kind `{new.kind}` (was `{old.kind}`)"
        out.append(Change("provider-kind-changed", name, old.kind, new.kind, summary))
    if old.base_url != new.base_url:
        summary = f"provider `{name}` now calls {show(new.base_url, None)} (was {show(old.base_url, None)})"
        out.append(Change("base-url-changed", name, old.base_url, new.base_url, summary))
    if old.api_key_env != new.api_key_env:
        summary = (
            f"provider `{name}` now reads its credential from {named(new.api_key_env)} "
            f"(was {named(old.api_key_env)})" + (": the deployment must set it" if new.api_key_env else "")
        )
        out.append(Change("credential-changed", name, old.api_key_env, new.api_key_env, summary))
    withdrawn = sorted(set(old.api_key_hosts) - set(new.api_key_hosts))
    if withdrawn and old.api_key_env == new.api_key_env:
        summary = (
            f"provider `{name}` may no longer send {named(new.api_key_env)} to {', '.join(withdrawn)} "
            "(`api_key_hosts`)"
        )
        out.append(
            Change(
                "key-host-withdrawn",
                name,
                old.api_key_hosts,
                new.api_key_hosts,
                summary,
                field="api_key_hosts",
                unit="list",
            )
        )
    if old.probe != new.probe:
        summary = f"provider `{name}`: active probe turned {show(new.probe, 'bool')}"
        out.append(Change("probe-changed", name, old.probe, new.probe, summary, unit="bool"))
    if old.recovery_check != new.recovery_check:
        before, after = _check_of(old), _check_of(new)
        summary = f"provider `{name}`: an open circuit is checked by `{after}` (was `{before}`)"
        out.append(Change("recovery-check-changed", name, before, after, summary, field="recovery_check"))
    if old.responses != new.responses:
        summary = (
            f"provider `{name}` "
            + ("now serves" if new.responses else "no longer serves")
            + " the Responses API: Responses callers' requests "
            + ("are relayed to its `/responses`" if new.responses else "are translated to chat")
        )
        out.append(Change("responses-changed", name, old.responses, new.responses, summary, unit="bool"))
    for setting, before, after, unit in changed_fields(old.timeouts, new.timeouts):
        summary = f"provider `{name}` timeout `{setting}`: {show(before, unit)} → {show(after, unit)}"
        out.append(Change("timeout-changed", name, before, after, summary, field=setting, unit=unit))
    for setting, before, after, unit in changed_fields(old.retry, new.retry):
        summary = f"provider `{name}` retry `{setting}`: {show(before, unit)} → {show(after, unit)}"
        out.append(Change("retry-changed", name, before, after, summary, field=f"retry.{setting}", unit=unit))
    if reordered(old.workers, new.workers):
        summary = f"provider `{name}` now lists its workers as {show(new.workers, 'list')}"
        out.append(Change("worker-order-changed", name, old.workers, new.workers, summary, unit="list"))
    return out


def _check_of(provider: PlanProvider) -> str:
    """A provider's recovery check as the runtime takes it (unset: by its probe)."""
    return provider.recovery_check or ("probe" if provider.probe else "off")
