"""Capabilities: a candidate known to lack what its alias `requires` is an error; unknown, a warning."""

from __future__ import annotations

from interlock.compiler.context import CompileContext, Link
from interlock.compiler.diagnostics import did_you_mean


def capabilities(ctx: CompileContext) -> None:
    """Check `requires` against `models:` facts; also check the facts name declared providers."""
    for model_id, model in ctx.models.items():
        if model.provider not in ctx.providers and not ctx.is_broken(f"providers.{model.provider}"):
            declared = ctx.declared_providers()
            ctx.sink.add(
                "IL304",
                model.entry.key_span,
                f"model facts for `{model_id}` name the unknown provider `{model.provider}`",
                path=f"models.{model_id}",
                value=model.provider,
                hint=did_you_mean(model.provider, declared)
                or f"declared providers: {', '.join(sorted(declared)) or 'none'}",
            )
    for name, alias in ctx.aliases.items():
        required = alias.section.requires
        if not required:
            continue
        for link in ctx.expanded.get(name, []):
            if ctx.broken_under(f"models.{link.candidate}"):
                continue  # its facts have errors of their own; guessing would add noise
            facts = ctx.models.get(link.candidate)
            known = facts.facts.capabilities if facts else None
            span, where = link.hop.span, link.hop.path
            if known is None:
                ctx.sink.add(
                    "IL309",
                    span,
                    f"`{link.candidate}`{_via(link)} in `{name}` has no known capabilities; "
                    f"`{name}` requires {', '.join(required)}",
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
                    f"`{link.candidate}`{_via(link)} lacks {', '.join(missing)}, "
                    f"which alias `{name}` requires",
                    path=where,
                    value=link.candidate,
                    hint=f"known capabilities of `{link.candidate}`: {', '.join(known) or 'none'}; "
                    "remove it from the chain or correct its facts",
                )


def _via(link: Link) -> str:
    """`` (via `mana/fast`)`` for a candidate reached through nested aliases, else empty."""
    inner = [hop.alias for hop in link.via[1:]]
    return f" (via `{'` -> `'.join(inner)}`)" if inner else ""
