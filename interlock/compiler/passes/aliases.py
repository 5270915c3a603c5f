"""Aliases -> expanded candidate lists; namespace, entries, references and cycles checked."""

from __future__ import annotations

import re

from interlock.compiler.context import Alias, CompileContext, Hop, Link
from interlock.compiler.diagnostics import Span, did_you_mean

_SPACE = re.compile(r"\s")


def aliases(ctx: CompileContext) -> None:
    """Fill ``ctx.expanded`` with every alias's candidates in fallback order."""
    namespace = ctx.server.alias_namespace
    for name, alias in ctx.aliases.items():
        if namespace and not name.startswith(namespace):
            ctx.sink.add(
                "IL301",
                alias.entry.key_span,
                f"alias `{name}` is outside the alias namespace `{namespace}`",
                path=f"aliases.{name}",
                value=name,
                hint=f"rename it to `{namespace}{name.rsplit('/', 1)[-1]}`",
            )
        provider = name.partition("/")[0]
        if "/" in name and provider in ctx.declared_providers():
            ctx.sink.add(
                "IL312",
                alias.entry.key_span,
                f"alias `{name}` is named like a model of provider `{provider}`; "
                "a request for it would be ambiguous",
                path=f"aliases.{name}",
                value=name,
                hint="give aliases their own prefix, e.g. `server.alias_namespace: mana/`",
            )
        if not alias.section.chain and not ctx.broken_under(f"aliases.{name}.chain"):
            ctx.sink.add(
                "IL302",
                ctx.span_of(alias.entry, "chain"),
                f"alias `{name}` has an empty chain",
                path=f"aliases.{name}.chain",
                value="[]",
                hint="list at least one `provider/model` candidate or another alias",
            )
        _check_entries(ctx, alias)
    _report_cycles(ctx)
    expander = _Expander(ctx)
    for name in ctx.aliases:
        ctx.expanded[name] = expander.expand(name)
    default = ctx.server.default_alias
    if default is not None and default not in ctx.aliases and not ctx.is_broken(f"aliases.{default}"):
        entry = ctx.sources.singletons.get("server")
        span = ctx.span_of(entry, "default_alias") if entry else Span("<config>")
        ctx.sink.add(
            "IL307",
            span,
            f"default alias `{default}` is not declared",
            path="server.default_alias",
            value=default,
            hint=did_you_mean(default, ctx.aliases)
            or f"declared: {', '.join(sorted(ctx.aliases)) or 'none'}",
        )


def classify(ctx: CompileContext, item: str) -> str:
    """`alias`, `candidate`, or the code of what is wrong with a chain entry."""
    if item in ctx.aliases or item in ctx.sources.named["aliases"]:
        return "alias"
    provider, sep, model = item.partition("/")
    if not sep or not provider or not model or _SPACE.search(item):
        return "IL303"
    namespace = ctx.server.alias_namespace
    if namespace and item.startswith(namespace):
        return "IL310"
    if provider not in ctx.providers:
        return "IL304"
    return "candidate"


def _check_entries(ctx: CompileContext, alias: Alias) -> None:
    seen: dict[str, int] = {}
    for position, item in enumerate(alias.section.chain):
        index = alias.source_index(position)
        where = f"aliases.{alias.name}.chain[{index}]"
        if item in seen:
            ctx.sink.add(
                "IL305",
                ctx.span_of(alias.entry, "chain", index),
                f"`{item}` appears twice in the chain of `{alias.name}`",
                path=where,
                value=item,
                hint=f"first listed at {ctx.span_of(alias.entry, 'chain', seen[item])}; "
                "a candidate is tried once",
            )
            continue
        seen[item] = index
        kind = classify(ctx, item)
        if kind == "IL303":
            ctx.sink.add(
                "IL303",
                ctx.span_of(alias.entry, "chain", index),
                f"chain entry `{item}` is not `provider/model`",
                path=where,
                value=item,
                hint=did_you_mean(item, ctx.aliases)
                or "write `provider/model` (e.g. `groq/llama-3.3-70b-versatile`) or another alias's name",
            )
        elif kind == "IL310":
            ctx.sink.add(
                "IL310",
                ctx.span_of(alias.entry, "chain", index),
                f"`{item}` is in the alias namespace but is not a declared alias",
                path=where,
                value=item,
                hint=did_you_mean(item, ctx.aliases)
                or f"declared aliases: {', '.join(sorted(ctx.aliases)) or 'none'}",
            )
        elif kind == "IL304":
            provider = item.partition("/")[0]
            if ctx.is_broken(f"providers.{provider}"):
                continue
            declared = ctx.declared_providers()
            ctx.sink.add(
                "IL304",
                ctx.span_of(alias.entry, "chain", index),
                f"unknown provider `{provider}` in chain entry `{item}`",
                path=where,
                value=provider,
                hint=did_you_mean(provider, declared)
                or f"declared providers: {', '.join(sorted(declared)) or 'none'}",
            )


def _report_cycles(ctx: CompileContext) -> None:
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    reported: set[frozenset[str]] = set()

    def visit(name: str, stack: list[str]) -> None:
        state[name] = 1
        alias = ctx.aliases[name]
        for position, item in enumerate(alias.section.chain):
            index = alias.source_index(position)
            if item not in ctx.aliases:
                continue
            if state.get(item) == 1:
                cycle = [*stack[stack.index(item) :], item]
                key = frozenset(cycle)
                if key not in reported:
                    reported.add(key)
                    ctx.sink.add(
                        "IL306",
                        ctx.span_of(alias.entry, "chain", index),
                        f"alias cycle: {' -> '.join(cycle)}",
                        path=f"aliases.{name}.chain[{index}]",
                        value=item,
                        hint="an alias may name another alias, but never itself through others",
                    )
            elif item not in state:
                visit(item, [*stack, item])
        state[name] = 2

    for name in ctx.aliases:
        if name not in state:
            visit(name, [name])


class _Expander:
    """Depth-first expansion with memoisation; a cycle (already reported) contributes nothing."""

    def __init__(self, ctx: CompileContext) -> None:
        self.ctx = ctx
        self.done: dict[str, list[Link]] = {}
        self.active: set[str] = set()

    def expand(self, name: str) -> list[Link]:
        if name in self.done:
            return self.done[name]
        if name in self.active:
            return []
        self.active.add(name)
        alias = self.ctx.aliases[name]
        links: list[Link] = []
        seen: set[str] = set()
        for position, item in enumerate(alias.section.chain):
            index = alias.source_index(position)
            here = Hop(name, index, self.ctx.span_of(alias.entry, "chain", index))
            kind = classify(self.ctx, item)
            if kind == "alias" and item in self.ctx.aliases:
                inner = [Link(link.candidate, here, link) for link in self.expand(item)]
            elif kind == "candidate":
                inner = [Link(item, here)]
            else:
                inner = []
            for link in inner:
                if link.candidate in seen:
                    if link.inner is not None:
                        self.ctx.sink.add(
                            "IL311",
                            here.span,
                            f"expanding `{item}` repeats `{link.candidate}` in `{name}`; "
                            "it keeps its first position",
                            path=here.path,
                            value=link.candidate,
                            hint=f"`{link.candidate}` is tried once; drop it from `{item}` or from `{name}` "
                            "if the order matters",
                        )
                    continue
                seen.add(link.candidate)
                links.append(link)
        self.active.discard(name)
        self.done[name] = links
        return links
