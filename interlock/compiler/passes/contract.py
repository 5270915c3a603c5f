"""Aliases -> the agent contract (guaranteed window, output ceiling, prefill allowance, reasoning), with
a warning for a chain whose windows differ enough to matter to an agent (IL504) and one for a chain
that mixes reasoning contracts so that a fallback mid-session is refused on the next turn (IL505).

An agent plans on what every candidate holds, since a fallback gets the same prompts: the guaranteed
window is the smallest effective window of the chain (each candidate's smallest over its routes, as
the plan loader settles them: a worker's default and limits, the gateway's cap, the declared
maximum; per slot, as llama-server's ``/props`` reports ``n_ctx``), the output ceiling the smallest
declared ``max_output_tokens``, the prefill allowance the smallest ``first_byte``. A reasoning
contract says what a candidate's answers carry that the next turn sends back: Anthropic's signed
thinking and OpenAI's encrypted reasoning items are accepted only by their issuer, so a chain that
holds one of them beside any other reasoning answer turns a fallback into a 400 on the next turn
(claude-code-router#1378, bifrost#2446).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from interlock.common.kinds import KINDS, has_workers
from interlock.compiler.context import Alias, CompileContext
from interlock.schema.plan import PlanContract, PlanReasoning, Reasoning

SPREAD = 2  # the largest window over the guaranteed one that IL504 lets pass for an agent's alias
STATEFUL: frozenset[Reasoning] = frozenset({"anthropic-signed", "encrypted"})
SHOWN = {
    "anthropic-signed": "Anthropic-signed thinking",
    "encrypted": "encrypted reasoning items",
    "reasoning_content": "`reasoning_content` text",
}


def contract(ctx: CompileContext) -> None:
    """Fill ``ctx.contracts`` with every alias's contract; warn where an agent would be misled."""
    for name, alias in ctx.aliases.items():
        links = ctx.expanded.get(name, [])
        candidates = list(dict.fromkeys(link.candidate for link in links))
        if not candidates or any(c.partition("/")[0] not in ctx.providers for c in candidates):
            continue  # errors of their own were reported; the plan is not emitted
        made = _contract(ctx, candidates)
        ctx.contracts[name] = made
        _spread(ctx, alias, made, candidates)
        _mixed(ctx, alias, made)


def _contract(ctx: CompileContext, candidates: list[str]) -> PlanContract:
    windows = {cid: window_of(ctx, cid) for cid in candidates}
    known = [w for w in windows.values() if w is not None]
    outputs = [o for cid in candidates if (o := _max_output(ctx, cid)) is not None]
    return PlanContract(
        window_tokens=min(known) if known else None,
        largest_window_tokens=max(known) if known else None,
        unknown_windows=[cid for cid, w in windows.items() if w is None],
        output_tokens=min(outputs) if outputs else None,
        prefill_ms=min(ctx.timeouts_of(cid.partition("/")[0])["first_byte"] for cid in candidates),
        reasoning=[reasoning_of(ctx, cid) for cid in candidates],
    )


def _max_output(ctx: CompileContext, candidate: str) -> int | None:
    model = ctx.models.get(candidate)
    return model.facts.max_output_tokens if model is not None else None


def window_of(ctx: CompileContext, candidate: str) -> int | None:
    """The smallest window the candidate has on any of its routes before run time; None where a route's
    window is known only from live metadata (an Ollama worker with no default anywhere)."""
    provider_name, _, model = candidate.partition("/")
    section = ctx.providers[provider_name].section
    declared = ctx.models[candidate].facts.context_tokens if candidate in ctx.models else None
    if not has_workers(section.kind, section.workers):
        return declared
    live = KINDS[section.kind].live_facts
    windows: list[int | None] = []
    for worker in (w for w in ctx.workers.values() if w.provider == provider_name):
        if live:
            default = worker.default_context_tokens or ctx.preflight.default_context_tokens
        else:
            default = declared if declared is not None else worker.default_context_tokens
        gateway_cap = ctx.preflight.max_context_tokens if live else None
        caps = [c for c in (worker.context_limits.get(model), gateway_cap, declared) if c is not None]
        windows.append(None if default is None else min([default, *caps]))
    if not windows or any(w is None for w in windows):
        return None
    return min(w for w in windows if w is not None)


def reasoning_of(ctx: CompileContext, candidate: str) -> PlanReasoning:
    """The candidate's reasoning contract: by its kind, and whether it is known to think."""
    provider_name = candidate.partition("/")[0]
    section = ctx.providers[provider_name].section
    model = ctx.models.get(candidate)
    capabilities = model.facts.capabilities if model is not None else None
    host = (urlsplit(section.base_url).hostname or "") if section.base_url else None
    kind: Reasoning
    if capabilities is not None and "thinking" not in capabilities:
        kind = "none"
    elif section.kind == "anthropic":
        kind = "anthropic-signed"  # every Claude model thinks when asked, its blocks signed
    elif capabilities is None:
        kind = "unknown"
    elif section.kind == "openai" and section.responses:
        kind = "encrypted"  # a Responses relay hands back the issuer's reasoning items
    else:
        kind = "reasoning_content"
    issuer = host if kind in STATEFUL else None
    return PlanReasoning(candidate=candidate, contract=kind, issuer=issuer)


def _spread(ctx: CompileContext, alias: Alias, made: PlanContract, candidates: list[str]) -> None:
    """IL504: an agent's alias (one that requires tools) whose windows differ more than ``SPREAD``x."""
    smallest, largest = made.window_tokens, made.largest_window_tokens
    if "tools" not in alias.section.requires or smallest is None or largest is None:
        return
    if largest <= smallest * SPREAD:
        return
    windows = {cid: window_of(ctx, cid) for cid in candidates}
    small = next(cid for cid, w in windows.items() if w == smallest)
    large = next(cid for cid, w in windows.items() if w == largest)
    ctx.sink.add(
        "IL504",
        alias.entry.key_span,
        f"alias `{alias.name}` guarantees an agent {smallest:,} tokens (`{small}`) although `{large}` "
        f"holds {largest:,}: an agent told the guaranteed window compacts {largest // smallest}x too "
        "early there, one told the larger overflows the fallback",
        path=f"aliases.{alias.name}",
        value=alias.name,
        hint="give agents an alias whose candidates have windows within 2x of each other, or raise "
        f"`{small}`'s window (`models: {{{small}: {{context_tokens: ...}}}}`, the server's own setting)",
    )


def _mixed(ctx: CompileContext, alias: Alias, made: PlanContract) -> None:
    """IL505: a signed or encrypted contract beside any other reasoning answer in one chain."""
    thinking = [r for r in made.reasoning if r.contract not in ("none", "unknown")]
    contracts = {(r.contract, r.issuer) for r in thinking}
    if len(contracts) < 2 or not any(contract in STATEFUL for contract, _ in contracts):
        return
    first = next(r for r in thinking if r.contract in STATEFUL)
    other = next(r for r in thinking if (r.contract, r.issuer) != (first.contract, first.issuer))
    ctx.sink.add(
        "IL505",
        alias.entry.key_span,
        f"alias `{alias.name}` mixes reasoning contracts: `{first.candidate}` answers with "
        f"{_shown(first)}, `{other.candidate}` with {_shown(other)}; after a fallback mid-session the "
        "next turn sends one's reasoning to the other, which refuses it (400)",
        path=f"aliases.{alias.name}",
        value=alias.name,
        hint="give each reasoning contract an alias of its own, or declare `capabilities` without "
        "`thinking` for the candidates that should not think",
    )


def _shown(reasoning: PlanReasoning) -> str:
    text = SHOWN[reasoning.contract]
    return f"{text} of {reasoning.issuer}" if reasoning.issuer else text
