"""Capabilities: a candidate known to lack what its alias `requires` is an error; unknown, a warning."""

from __future__ import annotations

from interlock.compiler.context import CompileContext
from interlock.compiler.diagnostics import did_you_mean


def capabilities(ctx: CompileContext) -> None:
    """Check `requires` against `models:` facts; also check the facts name declared providers."""
    for model_id, model in ctx.models.items():
        if model.provider not in ctx.providers and f"providers.{model.provider}" not in ctx.broken:
            ctx.sink.add(
                "IL304",
                model.entry.key_span,
                f"model facts for `{model_id}` name the unknown provider `{model.provider}`",
                path=f"models.{model_id}",
                value=model.provider,
                hint=did_you_mean(model.provider, ctx.providers),
            )
    for name, alias in ctx.aliases.items():
        required = alias.section.requires
        if not required:
            continue
        for link in ctx.expanded.get(name, []):
            facts = ctx.models.get(link.candidate)
            known = facts.facts.capabilities if facts else None
            span = link.via[0][1]
            where = f"aliases.{name}.requires"
            if known is None:
                ctx.sink.add(
                    "IL309",
                    span,
                    f"`{link.candidate}` in `{name}` has no known capabilities; `{name}` requires "
                    f"{', '.join(required)}",
                    path=where,
                    value=link.candidate,
                    hint=f"declare them: `models: {{{link.candidate}: {{capabilities: [...]}}}}`",
                )
                continue
            missing = [cap for cap in required if cap not in known]
            if missing:
                ctx.sink.add(
                    "IL308",
                    span,
                    f"`{link.candidate}` lacks {', '.join(missing)}, which alias `{name}` requires",
                    path=where,
                    value=link.candidate,
                    hint=f"known capabilities of `{link.candidate}`: {', '.join(known) or 'none'}; "
                    "remove it from the chain or correct its facts",
                )
