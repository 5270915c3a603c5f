"""`interlock explain`: how one alias expands, where each link was written, what each candidate can do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from interlock.common.kinds import KINDS, has_workers
from interlock.common.patterns import matching_row
from interlock.compiler.context import CompileContext, Link, Worker
from interlock.compiler.diagnostics import Span, visible
from interlock.schema.config import RETRY_DEFAULTS, RetrySection
from interlock.schema.durations import format_duration
from interlock.schema.plan import PlanContract


def explain(ctx: CompileContext, name: str) -> str:
    """A readable account of alias ``name`` (which must be in ``ctx.aliases``), shown as every
    diagnostic is (``visible``): credentials masked (a URL's `user:key@` and `?key=`, a key-shaped
    variable name or description), control characters escaped."""
    alias = ctx.aliases[name]
    head = f"{name}: {alias.section.description}" if alias.section.description else name
    out = [head, f"  defined at {alias.entry.key_span}"]
    required = alias.section.requires
    out.append(f"  requires: {', '.join(required) or 'nothing'}")
    out.append(f'  preflight: {ctx.preflight.mode} (see docs/runtime.md, "Preflight")')
    if alias.section.retry is not None:
        out.append(f"  retry, over its providers' own: {_retry(alias.section.retry)}")
    links = ctx.expanded.get(name, [])
    if not links:
        out.append("  no candidates (see `interlock lint`)")
    out.extend(_agent(ctx.contracts.get(name)))
    for number, link in enumerate(links, start=1):
        out.append(f"  {number}. {link.candidate}")
        out.append(f"       {_where(link)}")
        out.extend(f"       {line}" for line in _facts(ctx, link.candidate, required))
    return "".join(visible(line) + "\n" for line in out)


def _agent(contract: PlanContract | None) -> list[str]:
    """The agent contract (``passes/contract.py``): what a client can count on whichever candidate answers."""
    if contract is None:
        return []
    window = contract.window_tokens
    if window is None:
        shown = "unknown until the workers report it"
    else:
        shown = f"{window:,} tokens (the smallest of the chain"
        if contract.largest_window_tokens is not None and contract.largest_window_tokens > window:
            shown += f"; the largest {contract.largest_window_tokens:,}"
        shown += ")"
    if contract.unknown_windows and window is not None:
        shown += f"; {', '.join(contract.unknown_windows)}: known at run time"
    output = contract.output_tokens
    reasoning = ", ".join(
        f"{r.candidate} {r.contract}" + (f" ({r.issuer})" if r.issuer else "") for r in contract.reasoning
    )
    return [
        "  agent contract (docs/clients.md):",
        f"    guaranteed window: {shown}",
        f"    output ceiling: {f'{output:,} tokens' if output is not None else 'not declared'}",
        f"    prefill allowance: {format_duration(contract.prefill_ms)} to the first byte on every "
        "candidate (stretched by the prompt speed learned)",
        f"    reasoning: {reasoning}",
    ]


def _where(link: Link) -> str:
    *outer, written = link.via
    text = f"written at {_line(written.span)} in {written.alias}"
    if outer:
        text += ", reached via " + " <- ".join(f"{hop.alias} ({_line(hop.span)})" for hop in reversed(outer))
    return text


def _line(span: Span) -> str:
    """``file:line``, without the column."""
    return f"{span.file}:{span.line}" if span.line > 0 else span.file


def _facts(ctx: CompileContext, candidate: str, required: Sequence[str]) -> list[str]:
    provider_name, _, model = candidate.partition("/")
    facts = ctx.models.get(candidate)
    caps = facts.facts.capabilities if facts else None
    tokens = facts.facts.context_tokens if facts else None
    line = f"capabilities: {', '.join(sorted(caps)) if caps is not None else 'unknown'}"
    line += f"; context: {f'{tokens} tokens' if tokens else 'unknown'}"
    lines = [line]
    needed = ", ".join(required)
    if required:
        if caps is None:
            lines.append(f"requires {needed}: unknown (declare its capabilities under `models:`)")
        else:
            missing = [cap for cap in required if cap not in caps]
            lines.append(f"lacks {', '.join(missing)}" if missing else f"meets requires ({needed})")
    provider = ctx.providers.get(provider_name)
    if provider is None:
        return lines
    section = provider.section
    kind = KINDS[section.kind]
    served_by_workers = has_workers(section.kind, section.workers)
    key = f"key from ${section.api_key_env}" if section.api_key_env else "no key"
    if section.api_key_env and section.api_key_hosts:
        key += f" (may go to {', '.join(section.api_key_hosts)}: api_key_hosts)"
    probe = "probe on" if section.probe else "probe off"
    if not served_by_workers:
        lines.append(f"provider {provider_name}: {section.kind} at {section.base_url}, {key}, {probe}")
    elif kind.live_facts:
        lines.append(f"provider {provider_name}: ollama, probe {'on' if section.probe else 'off'}")
    else:
        lines.append(f"provider {provider_name}: {section.kind} on workers, {key}, {probe}")
    lines.append(f"timeouts: {_timeouts(ctx, provider_name)}")
    lines.append(f"retry: {_retry(section.retry, RETRY_DEFAULTS)}")
    if not kind.live_facts:
        lines.append(f"preflight: declared facts only; context {f'{tokens} tokens' if tokens else 'unknown'}")
    for worker in ctx.workers.values():
        if worker.provider != provider_name:
            continue
        row = matching_row(worker.patterns, model)
        slots = worker.max_concurrent if row is None else row.limit
        rule = "max_concurrent" if row is None else f"pattern `{row.pattern}`"
        lines.append(f"worker {worker.name} {worker.url}: {slots} of {worker.max_concurrent} slots ({rule})")
        if kind.live_facts:
            lines.append(f"  context sent as num_ctx: {_context(ctx, worker, model, tokens)}")
            lines.append(f"  placement: {_placement(ctx, worker, candidate)}")
        if worker.server is not None:
            lines.append(f"  load signals read each probe round from it: server {worker.server}")
    if served_by_workers:
        lines.append(f"worker choice: {_affinity(ctx, live=kind.live_facts)}")
    if not kind.live_facts:
        return lines
    lines.append(
        "live at runtime (/api/show, /api/ps): capabilities, maximum, Modelfile num_ctx and loaded "
        "context replace or cap these"
    )
    return lines


def _affinity(ctx: CompileContext, *, live: bool) -> str:
    """How prefix affinity and sticky sessions choose among workers (``routing.prefix``, ``.sticky``)."""
    prefix, sticky = ctx.routing.prefix, ctx.routing.sticky.enabled
    if not prefix.enabled:
        pin = "; a sticky session goes to its pinned worker" if sticky else ""
        return f"by load (routing.prefix: off){pin}"
    cache = "one prompt a slot" + (f" + {prefix.spare_prompts} spare" if prefix.spare_prompts else "")
    text = (
        f"wait + {prefix.miss:g} x uncached prefill + {prefix.evict:g} x the prefill an arrival evicts "
        f"(routing.prefix), at each worker's learned prompt speed; cache: {cache}"
    )
    if live:
        text = "by load, less the prefill a cached prefix saves (routing.prefix)"
    return text + ("; a sticky pin decides only for a prompt without blocks" if sticky else "")


def _context(ctx: CompileContext, worker: Worker, model: str, declared: int | None) -> str:
    """The static effective context of ``model`` on ``worker`` (before live metadata), and why."""
    if worker.default_context_tokens is not None:
        tokens, source = worker.default_context_tokens, "worker default"
    elif ctx.preflight.default_context_tokens is not None:
        tokens, source = ctx.preflight.default_context_tokens, "preflight default"
    else:
        return "unknown until the worker reports it (nothing is blocked; no num_ctx is sent)"
    caps = {
        "worker context_limits": worker.context_limits.get(model),
        "preflight.max_context_tokens": ctx.preflight.max_context_tokens,
        "declared maximum": declared,
    }
    known = {name: cap for name, cap in caps.items() if cap is not None}
    if known:
        name, cap = min(known.items(), key=lambda item: item[1])
        if cap < tokens:
            return f"{cap} tokens ({source} {tokens}, capped by {name})"
        limit = f"; cap {cap}: {name}"
    else:
        limit = ""
    return f"{tokens} tokens ({source}{limit})"


def _placement(ctx: CompileContext, worker: Worker, candidate: str) -> str:
    """Whether ``candidate`` stays loaded on ``worker`` (its home), and why (``compiler.homes``)."""
    placed = ctx.placement
    if placed is None:
        return "not computed"
    budget = placed.budgets.get(worker.name)
    if budget is None:
        return "worker memory unknown (set `memory_gib` or a profile with `vram_gib`)"
    ranked = next((r for r in placed.ranked if r.candidate == candidate), None)
    foot = ranked.footprint.get(worker.name) if ranked is not None else None
    if foot is None:
        return "size not declared: placed at runtime once the worker reports it (/api/tags, /api/ps)"
    used = placed.packing.used.get(worker.name, 0.0)
    where = f"{foot.total:.1f} GiB; {used:.1f} of {budget:g} GiB placed on {worker.name}"
    if candidate in placed.packing.homes.get(worker.name, ()):
        warm = f", warmed at start (keep_alive {_keep_alive(placed.keep_alive_s)})" if placed.warm else ""
        return f"home: stays loaded ({where}){warm}"
    if candidate in placed.packing.homeless:
        return f"no home on any worker ({where}): a request loads it"
    return f"not here ({where}); home on {', '.join(placed.homes_of(candidate))}"


def _keep_alive(seconds: int | None) -> str:
    return "forever" if seconds is None or seconds < 0 else format_duration(seconds * 1000)


def _retry(section: RetrySection | None, defaults: Mapping[str, int] | None = None) -> str:
    """A `retry` section's keys (``defaults`` filling the rest), as a line of explain."""
    shown = []
    for key in ("count", "backoff", "retry_after_max"):
        value = getattr(section, key) if section is not None else None
        if value is None and defaults is not None:
            value = defaults[key]
        if value is not None:
            shown.append(f"{key} {value if key == 'count' else format_duration(value)}")
    return ", ".join(shown)


def _timeouts(ctx: CompileContext, provider_name: str) -> str:
    return ", ".join(f"{key} {format_duration(ms)}" for key, ms in ctx.timeouts_of(provider_name).items())
