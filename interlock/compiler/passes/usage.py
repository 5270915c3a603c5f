"""Lint warnings about what nothing uses: providers, model facts; aliases with nothing to fall back to."""

from __future__ import annotations

from interlock.compiler.context import CompileContext


def usage(ctx: CompileContext) -> None:
    """Warnings only; `lint --strict` turns them into failures."""
    used = {link.candidate for links in ctx.expanded.values() for link in links}
    used_providers = {candidate.split("/", 1)[0] for candidate in used}
    for name, provider in ctx.providers.items():
        if name not in used_providers:
            ctx.sink.add(
                "IL501",
                provider.entry.key_span,
                f"provider `{name}` is used by no alias",
                path=f"providers.{name}",
                value=name,
                hint="callers can still reach it directly if `direct_models: allow`; otherwise remove it",
            )
    for model_id, model in ctx.models.items():
        if model_id not in used:
            ctx.sink.add(
                "IL503",
                model.entry.key_span,
                f"facts about `{model_id}`, which no alias uses",
                path=f"models.{model_id}",
                value=model_id,
            )
    for name, links in ctx.expanded.items():
        if len(links) == 1:
            ctx.sink.add(
                "IL502",
                ctx.span_of(ctx.aliases[name].entry, "chain"),
                f"alias `{name}` has a single candidate; when it fails there is nothing to fall back to",
                path=f"aliases.{name}.chain",
                value=name,
                hint="add a second candidate on another provider",
            )
