"""Lint warnings about what nothing uses: providers, model facts; aliases with nothing to fall back to."""

from __future__ import annotations

import difflib

from interlock.compiler.context import CompileContext
from interlock.compiler.passes.aliases import classify


def usage(ctx: CompileContext) -> None:
    """Warnings only; `lint --strict` turns them into failures.

    "Used" counts every chain entry as written, even in an alias that has errors, so that an error in
    an alias does not also make its providers look unused.
    """
    written = _written_chain_entries(ctx)
    used = {link.candidate for links in ctx.expanded.values() for link in links} | written
    used_providers = {candidate.split("/", 1)[0] for candidate in used}
    # A misspelt provider in a chain (`grok/...`, reported as IL304 with "did you mean `groq`?") does not
    # make `groq` look unused on top.
    declared = ctx.declared_providers()
    for unknown in used_providers - set(declared):
        used_providers.update(difflib.get_close_matches(unknown, declared, n=1, cutoff=0.6))
    for name, provider in ctx.providers.items():
        if name not in used_providers:
            ctx.sink.add(
                "IL501",
                provider.entry.key_span,
                f"provider `{name}` is used by no alias",
                path=f"providers.{name}",
                value=name,
                hint="callers can still reach it directly when `server.direct_models: allow`; "
                "otherwise remove it",
            )
    for model_id, model in ctx.models.items():
        if model_id not in used and model.provider in ctx.providers:  # else IL304 says why
            ctx.sink.add(
                "IL503",
                model.entry.key_span,
                f"facts about `{model_id}`, which no alias uses",
                path=f"models.{model_id}",
                value=model_id,
                hint="remove them, or add the model to a chain",
            )
    clean = _Clean(ctx)
    for name, links in ctx.expanded.items():
        if len(links) == 1 and clean.check(name):
            ctx.sink.add(
                "IL502",
                ctx.span_of(ctx.aliases[name].entry, "chain"),
                f"alias `{name}` has a single candidate (`{links[0].candidate}`); when it fails there is "
                "nothing to fall back to",
                path=f"aliases.{name}.chain",
                value=links[0].candidate,
                hint="add a second candidate, ideally on another provider",
            )


def _written_chain_entries(ctx: CompileContext) -> set[str]:
    out: set[str] = set()
    for entry in ctx.sources.named["aliases"].values():
        chain = entry.value.get("chain") if isinstance(entry.value, dict) else None
        if isinstance(chain, list):
            out.update(item for item in chain if isinstance(item, str))
    return out


class _Clean:
    """Whether an alias's expansion is complete: no entry of it (or of the aliases it names) has errors."""

    def __init__(self, ctx: CompileContext) -> None:
        self.ctx = ctx
        self.memo: dict[str, bool] = {}

    def check(self, name: str) -> bool:
        if name in self.memo:
            return self.memo[name]
        self.memo[name] = False  # a cycle is not clean
        alias = self.ctx.aliases.get(name)
        ok = alias is not None and not self.ctx.broken_under(f"aliases.{name}.chain")
        if alias is not None and len(set(alias.section.chain)) != len(alias.section.chain):
            ok = False  # a duplicate entry (IL305) already explains why there are few candidates
        if alias is not None and ok:
            for item in alias.section.chain:
                kind = classify(self.ctx, item)
                if kind == "candidate":
                    continue
                if kind != "alias" or not self.check(item):
                    ok = False
                    break
        self.memo[name] = ok
        return ok
