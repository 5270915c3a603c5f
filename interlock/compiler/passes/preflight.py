"""Preflight settings: a known mode, no negative reserve, a margin in 0-100, context limits in range."""

from __future__ import annotations

from interlock.compiler.context import CompileContext
from interlock.compiler.diagnostics import Span, did_you_mean

MODES = ("enforce", "observe", "off")


def preflight(ctx: CompileContext) -> None:
    """Check `preflight:` and each worker's `context_limits` against the models' declared maximum."""
    entry = ctx.sources.singletons.get("preflight")
    section = ctx.preflight

    def span(key: str) -> Span:
        if entry is None:
            main = ctx.sources.main
            return Span(main.file if main else "<config>")
        return ctx.span_of(entry, key)

    if section.mode not in MODES and not ctx.is_broken("preflight.mode"):
        ctx.sink.add(
            "IL701",
            span("mode"),
            f"`preflight.mode` must be one of {', '.join(MODES)}, not `{section.mode}`",
            path="preflight.mode",
            value=section.mode,
            hint=did_you_mean(section.mode, MODES) or "`enforce` skips what cannot fit, `observe` reports",
        )
    for key in ("image_reserve_tokens", "default_output_tokens"):
        value = getattr(section, key)
        if value < 0 and not ctx.is_broken(f"preflight.{key}"):
            ctx.sink.add(
                "IL702",
                span(key),
                f"`preflight.{key}` must not be negative, not `{value}`",
                path=f"preflight.{key}",
                value=value,
                hint="a token count of 0 or more, e.g. 2048",
            )
    for key in ("default_context_tokens", "max_context_tokens"):
        value = getattr(section, key)
        if value is not None and value < 1 and not ctx.is_broken(f"preflight.{key}"):
            ctx.sink.add(
                "IL209",
                span(key),
                f"`preflight.{key}` must be at least 1 token, not `{value}`",
                path=f"preflight.{key}",
                value=value,
                hint="leave it out for `unknown`, or give a token count such as 8192",
            )
    margin = section.margin_percent
    if not 0 <= margin <= 100 and not ctx.is_broken("preflight.margin_percent"):
        ctx.sink.add(
            "IL703",
            span("margin_percent"),
            f"`preflight.margin_percent` must be between 0 and 100, not `{margin}`",
            path="preflight.margin_percent",
            value=f"{margin}",
            hint="a safety margin in percent of the estimate, e.g. 15",
        )
    _limits_within_maximum(ctx)


def _limits_within_maximum(ctx: CompileContext) -> None:
    """A worker's `context_limits` above the model's declared `context_tokens` can never be used whole."""
    for worker in ctx.workers.values():
        for model, limit in worker.context_limits.items():
            facts = ctx.models.get(f"{worker.provider}/{model}")
            maximum = facts.facts.context_tokens if facts else None
            if maximum is None or limit <= maximum:
                continue
            ctx.sink.add(
                "IL704",
                ctx.span_of(worker.entry, "context_limits", model),
                f"worker `{worker.name}` allows `{model}` a context of {limit} tokens, more than its "
                f"declared maximum of {maximum}",
                path=f"providers.{worker.provider}.workers[{worker.entry.path[-1]}].context_limits.{model}",
                value=limit,
                hint=f"lower it to {maximum} or correct `models: {{{worker.provider}/{model}: "
                "{context_tokens: ...}}`",
            )
