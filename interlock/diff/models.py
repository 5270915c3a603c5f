"""Facts about candidate models: capabilities and context windows (added candidates show in aliases)."""

from __future__ import annotations

from interlock.diff.change import Change, show
from interlock.schema.plan import RoutingPlan


def models(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """Compare the facts of every candidate both plans reference."""
    out: list[Change] = []
    for name in sorted(base.candidates.keys() & head.candidates.keys()):
        old, new = base.candidates[name], head.candidates[name]
        if old.capabilities != new.capabilities:
            before, after = show(old.capabilities, "list"), show(new.capabilities, "list")
            if old.capabilities is None:
                before = "unknown"
            if new.capabilities is None:
                after = "unknown"
            summary = f"`{name}` capabilities: {before} → {after}"
            out.append(
                Change("capabilities-changed", name, old.capabilities, new.capabilities, summary, unit="list")
            )
        if old.context_tokens != new.context_tokens:
            before, after = show(old.context_tokens, None), show(new.context_tokens, None)
            summary = f"`{name}` context window: {before} → {after} tokens"
            out.append(
                Change("context-tokens-changed", name, old.context_tokens, new.context_tokens, summary)
            )
        if old.max_output_tokens != new.max_output_tokens:
            before, after = show(old.max_output_tokens, None), show(new.max_output_tokens, None)
            summary = f"`{name}` most output tokens an answer: {before} → {after}"
            out.append(
                Change("max-output-changed", name, old.max_output_tokens, new.max_output_tokens, summary)
            )
    return out
