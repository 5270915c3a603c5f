"""Aliases: added or removed, which model answers first, chain membership and order, guarantees,
retries."""

from __future__ import annotations

from interlock.diff.change import Change, changed_fields, show
from interlock.schema.plan import PlanAlias, PlanRetry, RoutingPlan

SATURATION = {
    "fallback": "(skips to the next candidate at once)",
    "queue": "(waits in the worker's bounded queue)",
}


def aliases(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """Compare every alias of ``base`` with the one of the same name in ``head``."""
    out: list[Change] = []
    for name in sorted(base.aliases.keys() | head.aliases.keys()):
        old, new = base.aliases.get(name), head.aliases.get(name)
        if old is None and new is not None:
            chain = show(new.candidates, "chain")
            summary = f"new alias `{name}` answers with {chain}"
            out.append(Change("alias-added", name, None, new.candidates, summary, unit="chain"))
        elif new is None and old is not None:
            summary = f"alias `{name}` is removed: callers that still send it will get an error"
            twins = [
                n for n in sorted(head.aliases.keys() - base.aliases.keys()) if _same_chain(head, n, old)
            ]
            if twins:
                summary += f"; {', '.join(f'`{n}`' for n in twins)} has the same chain (renamed?)"
            out.append(Change("alias-removed", name, old.candidates, None, summary, unit="chain"))
        elif old is not None and new is not None:
            out.extend(_chain(name, old.candidates, new.candidates))
            out.extend(_requires(old, new))
            out.extend(_contract(old, new))
            if old.on_saturation != new.on_saturation:
                summary = (
                    f"`{name}` when every slot is full: `{old.on_saturation}` → `{new.on_saturation}` "
                    + SATURATION[new.on_saturation]
                )
                out.append(
                    Change("saturation-policy-changed", name, old.on_saturation, new.on_saturation, summary)
                )
            if old.fallback_after_ms != new.fallback_after_ms:
                before, after = old.fallback_after_ms, new.fallback_after_ms
                summary = (
                    f"`{name}` spills when the expected wait exceeds: "
                    f"{show(before, 'ms')} → {show(after, 'ms')}"
                )
                out.append(
                    Change("saturation-policy-changed", name, before, after, summary, "fallback_after", "ms")
                )
            out.extend(_retry(name, old, new))
            if old.resume != new.resume:
                summary = (
                    f"`{name}` resumes a cut stream on a replica of its model: {old.resume} → {new.resume}"
                )
                out.append(Change("alias-resume-changed", name, old.resume, new.resume, summary, "resume"))
            if old.description != new.description:
                summary = f"`{name}` description: {old.description!r} → {new.description!r}"
                out.append(Change("description-changed", name, old.description, new.description, summary))
    return out


def _same_chain(plan: RoutingPlan, name: str, alias: PlanAlias) -> bool:
    return plan.aliases[name].candidates == alias.candidates


def _chain(name: str, old: list[str], new: list[str]) -> list[Change]:
    out: list[Change] = []
    if old[:1] != new[:1]:
        first = new[0] if new else None
        was = old[0] if old else None
        summary = f"`{name}` now answers with `{first}` first (was `{was}`)"
        out.append(Change("first-choice-changed", name, was, first, summary))
    for candidate in old:
        if candidate not in new:
            summary = (
                f"`{name}` no longer falls back to `{candidate}` (was candidate {old.index(candidate) + 1})"
            )
            out.append(Change("candidate-removed", name, candidate, None, summary))
    for candidate in new:
        if candidate not in old:
            place = f"candidate {new.index(candidate) + 1} of {len(new)}"
            summary = f"`{name}` gains `{candidate}` as {place}"
            out.append(Change("candidate-added", name, None, candidate, summary))
    if reordered(old, new):
        summary = f"`{name}` tries its candidates in a new order: {show(new, 'chain')}"
        out.append(Change("chain-reordered", name, old, new, summary, unit="chain"))
    return out


def reordered(old: list[str], new: list[str]) -> bool:
    """Whether the members both lists share appear in a different relative order."""
    kept = set(old) & set(new)
    return [item for item in old if item in kept] != [item for item in new if item in kept]


def _retry(name: str, old: PlanAlias, new: PlanAlias) -> list[Change]:
    """The `retry` keys an alias overrides for its candidates: set, dropped (its providers' own), changed."""
    before, after = old.retry or PlanRetry(), new.retry or PlanRetry()
    out: list[Change] = []
    for setting, was, now, unit in changed_fields(before, after):
        summary = (
            f"`{name}` retry `{setting}` for its candidates: {show(was, unit)} → {show(now, unit)}"
            " (none: its providers' own)"
        )
        out.append(Change("alias-retry-changed", name, was, now, summary, f"retry.{setting}", unit))
    return out


def _requires(old: PlanAlias, new: PlanAlias) -> list[Change]:
    out: list[Change] = []
    name = old.name
    for capability in sorted(set(old.requires) - set(new.requires)):
        summary = f"`{name}` no longer guarantees `{capability}`: its chain may now hold models without it"
        out.append(Change("requires-dropped", name, capability, None, summary))
    for capability in sorted(set(new.requires) - set(old.requires)):
        summary = f"`{name}` now guarantees `{capability}` for every candidate"
        out.append(Change("requires-added", name, None, capability, summary))
    return out


def _contract(old: PlanAlias, new: PlanAlias) -> list[Change]:
    """What an agent sees change (``PlanContract``): the guaranteed window, the output ceiling (a drop
    breaks a client configured for the old value), the candidates' reasoning contracts."""
    if old.contract is None or new.contract is None:
        return []  # a plan compiled before the contract: nothing to compare it with
    name, before, after = old.name, old.contract, new.contract
    out: list[Change] = []
    for field, kind, what in (
        ("window_tokens", "agent-window", "guaranteed window"),
        ("output_tokens", "output-ceiling", "output ceiling"),
    ):
        was, now = getattr(before, field), getattr(after, field)
        if was == now:
            continue
        dropped = now is None or (was is not None and now < was)
        summary = f"`{name}` {what}: {show(was, None)} → {show(now, None)} tokens"
        if dropped:
            summary += " (a client configured for the old value now overflows: `interlock connect` again)"
        out.append(Change(f"{kind}-{'dropped' if dropped else 'raised'}", name, was, now, summary))
    was_of = {r.candidate: (r.contract, r.issuer) for r in before.reasoning}
    now_of = {r.candidate: (r.contract, r.issuer) for r in after.reasoning}
    for candidate in [c for c in now_of if c in was_of and was_of[c] != now_of[c]]:
        was, now = (_reasoning(*pair) for pair in (was_of[candidate], now_of[candidate]))
        summary = f"`{name}`: `{candidate}` answers with reasoning {was} → {now}"
        out.append(Change("reasoning-changed", name, was, now, summary, field=candidate))
    return out  # a candidate added, removed or moved: the chain's own changes say so


def _reasoning(contract: str, issuer: str | None) -> str:
    return f"{contract} ({issuer})" if issuer else contract
