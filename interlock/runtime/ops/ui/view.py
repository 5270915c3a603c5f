"""What the status page shows, as plain data: one small accessor per fact, read from the live live.

Each section (``SECTIONS``) is a function ``(Moment) -> dict`` that reads the current plan and state;
the page renders them, ``/ui/<section>`` renders one. A ``Moment`` holds what was read for the render
(the wall clock, the slot backend's report), so every section of one page agrees. Work is bounded by
the plan's size and the fixed rings (samples, recent events); nothing here is on the request path, and
nothing here holds a URL, a header value, a prompt or a credential: names, states, times, counts and
classes only.

New facts plug in as accessors (``loaded_models`` and ``model_facts`` read the live Ollama metadata of
``runtime.books.facts``); a fact nobody has reported is shown as "not known", never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlock.common.patterns import untagged
from interlock.runtime.base.clock import iso_utc
from interlock.runtime.books.fit import capabilities_on, effective_context
from interlock.runtime.books.samples import Sample, share
from interlock.runtime.loaded.tables import Candidate, worker_label
from interlock.runtime.state.base import SlotReport

if TYPE_CHECKING:
    from interlock.runtime.request.services import LiveState


@dataclass(frozen=True, slots=True)
class Moment:
    """What one render reads: the live, the wall clock, every worker's slots (backend's whole view)."""

    live: LiveState
    now: float
    slots: Mapping[str, SlotReport]


async def moment(live: LiveState) -> Moment:
    return Moment(live, live.wall(), await live.slots.report())


Section = Callable[[Moment], dict[str, Any]]


def when(epoch: float | None, now: float) -> dict[str, Any] | None:
    """A moment as ISO time plus its age in seconds (negative: in the future)."""
    if epoch is None:
        return None
    return {"iso": iso_utc(epoch), "age_s": round(now - epoch, 1)}


def span(seconds: float) -> str:
    """A length of time for people: ``40 s``, ``12 min``, ``3.5 h``, ``2.0 d``."""
    seconds = abs(seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


# -- accessors ---------------------------------------------------------------------------------------


def candidate_state(live: LiveState, candidate: Candidate, now: float) -> dict[str, Any]:
    health = live.health
    state = health.candidate(candidate.id)
    mono = health.clock()
    block = health.candidate_block(candidate.id)
    endpoints_up = any(health.endpoint_usable(r.endpoint.label) for r in candidate.routes)
    until = max(state.open_until, state.rate_limited_until)
    return {
        "id": candidate.id,
        "healthy": block is None and endpoints_up,
        "why_not": block or (None if endpoints_up else "endpoint_down"),
        "open_until": when(now + (until - mono), now) if until > mono else None,
        "last_error_class": state.last_error_class,
        "last_error_status": state.last_error_status,
        "last_error": when(state.last_error_at, now),
        "last_answered": when(state.last_success_at, now),
        "workers": [r.worker for r in candidate.routes if r.worker is not None],
    }


def endpoint_state(live: LiveState, label: str, now: float) -> dict[str, Any]:
    health = live.health
    state = health.endpoint(label)
    mono = health.clock()
    return {
        "healthy": health.endpoint_usable(label),
        "probe_ok": state.probe_ok,
        "last_probe": when(state.last_probe_at, now),
        "last_probe_error_class": state.last_probe_error,
        "open_until": when(now + (state.open_until - mono), now) if state.open_until > mono else None,
        "last_error_class": state.last_error_class,
        "last_success": when(state.last_success_at, now),
    }


def _in_use(per_model: dict[str, int], model: str) -> int:
    """A model's slots in use, counted untagged (`m` for `m:latest`: one model, one count)."""
    return per_model.get(untagged(model), 0)


def slot_state(at: Moment, worker: str) -> dict[str, Any]:
    limits = at.live.plan.workers[worker]
    pool = at.slots.get(worker) or SlotReport()
    per_model = dict(pool.per_model)
    return {
        "in_use": pool.in_use,
        "max": limits.max_concurrent,
        "waiting": pool.waiting,
        "max_waiting": limits.max_waiting,
        "rejected": pool.rejected,
        "models": [
            {"model": model, "in_use": _in_use(per_model, model), "limit": limit}
            for model, limit in sorted(limits.slots.items())
        ],
    }


def loaded_models(live: LiveState, worker: str) -> list[dict[str, Any]] | None:
    """The models a worker has in memory (Ollama's ``/api/ps``) with their context; None: not known."""
    limits, fleet = live.plan.workers[worker], live.fleet  # a plan with workers has a fleet
    loaded = fleet.facts.worker(worker_label(limits.provider, worker)).loaded if fleet is not None else None
    if loaded is None:
        return None
    return [{"model": model, "context_tokens": ctx} for model, ctx in sorted(loaded.items())]


def placed_models(live: LiveState, worker: str) -> dict[str, Any] | None:
    """The models placement keeps loaded on ``worker`` and what their warm-up found; None where placement
    is neither on nor able to place anything (``runtime.fleet.placement``)."""
    plan, fleet = live.plan, live.fleet
    if fleet is None or not fleet.placement.shown(plan):
        return None
    known = fleet.placement.budgets.get(worker)
    budget = known[0] if known is not None else None
    homes = fleet.placement.homes.get(worker, ())
    return {
        "budget_gib": budget,
        "warm": plan.placement.warm,
        "models": [
            {"model": h.model, "footprint_gib": h.footprint_gib, "state": h.state, "source": h.size_source}
            for h in homes
        ],
    }


def model_facts(live: LiveState, candidate: Candidate) -> list[dict[str, Any]]:
    """Per route of a candidate: capabilities and context, live where a worker said, else declared; the
    prompt speed and prompt counts its answers taught."""
    facts, learned = live.facts, live.learned
    rows = []
    for route in candidate.routes:
        label, key = route.endpoint.label, candidate.facts_key
        rate = learned.prefill.learned(label, key) if learned is not None else None
        counted = learned.counts.get(label, key) if learned is not None else None
        caps = capabilities_on(route, candidate, facts)
        window, source = effective_context(route, candidate, facts)
        info = facts.model(route.endpoint.label, candidate.facts_key) if route.worker else None
        live_caps = info is not None and info.capabilities is not None
        rows.append(
            {
                "where": route.worker or candidate.provider,
                "capabilities": sorted(caps) if caps is not None else None,
                "capabilities_source": "live" if live_caps else "declared" if caps is not None else "unknown",
                "max_context": info.max_context if info is not None else candidate.context_tokens,
                "modelfile_num_ctx": info.modelfile_num_ctx if info is not None else None,
                "loaded_context": facts.loaded_context(route.endpoint.label, candidate.facts_key)
                if route.worker
                else None,
                "context_tokens": window,
                "context_source": source,
                # learned from answers (``runtime.learned``): what first-byte deadlines stretch by, and
                # how the server counts prompts against the estimate
                "prompt_tokens_per_s": round(rate, 1) if rate is not None else None,
                "counted_ratio": round(counted.last_ratio, 2) if counted is not None else None,
                "counted_samples": counted.samples if counted is not None else 0,
            }
        )
    return rows


def telemetry(live: LiveState, worker: str) -> dict[str, Any] | None:
    fleet = live.fleet  # a plan with workers has one
    return fleet.telemetry.report(worker) if fleet is not None else None


def plan_source(live: LiveState) -> str | None:
    """The file the plan was read from (a path the operator gave; never a URL or a credential)."""
    return live.status.source_path


def samples(at: Moment) -> tuple[list[Sample], Sample]:
    """The ring of samples and the state now (the last point of every picture)."""
    ring = at.live.samples
    return list(ring.ring), ring.now(at.slots)


# -- sections ----------------------------------------------------------------------------------------


def aliases(at: Moment) -> dict[str, Any]:
    live, now = at.live, at.now
    ring, current = samples(at)
    oldest = ring[0] if ring else current
    traffic = share(oldest.answered, current.answered)
    rows = []
    for name, alias in live.plan.aliases.items():
        counts = traffic.get(name, {})
        total = sum(counts.values())
        candidates = []
        for position, candidate in enumerate(alias.candidates, start=1):
            row = candidate_state(live, candidate, now)
            row["position"] = position
            row["answers"] = int(counts.get(candidate.id, 0))
            row["share"] = counts.get(candidate.id, 0) / total if total else None
            candidates.append(row)
        rows.append(
            {
                "name": name,
                "description": alias.description,
                "requires": list(alias.requires),
                "servable": any(c["healthy"] for c in candidates),
                "answers": int(total),
                "candidates": candidates,
            }
        )
    return {"aliases": rows, "window_s": round(current.at - oldest.at, 1)}


def workers(at: Moment) -> dict[str, Any]:
    live, now = at.live, at.now
    plan = live.plan
    ring, current = samples(at)
    points = [*ring, current]
    rows = []
    for name, limits in plan.workers.items():
        slots = slot_state(at, name)
        rows.append(
            {
                "name": name,
                "provider": limits.provider,
                **endpoint_state(live, worker_label(limits.provider, name), now),
                "slots": slots,
                "occupancy": [(p.at - now, p.slots_in_use.get(name, 0)) for p in points],
                "loaded": loaded_models(live, name),
                "placed": placed_models(live, name),
                "telemetry": telemetry(live, name),
            }
        )
    providers = []
    for name, provider in plan.providers.items():
        if any(worker is not None for worker in provider.workers):
            continue  # shown by worker above
        for endpoint in provider.endpoints:
            providers.append(
                {"name": name, "kind": provider.kind, "probe": provider.probe}
                | endpoint_state(live, endpoint.label, now)
            )
    return {
        "workers": rows,
        "providers": providers,
        "queue": queue_state(live),
        "window_s": round(current.at - points[0].at, 1),
    }


def queue_state(live: LiveState) -> list[dict[str, Any]]:
    """Who waited for a slot in this process, by tenant and priority class (``runtime.state.fair``):
    waiting now, handed a slot after waiting, their mean wait, turned away; only those that waited."""
    metrics = live.metrics
    waited = metrics.queue_wait_seconds.children
    waiting = metrics.queue_waiting.children
    away = metrics.queue_turned_away.children
    rows = []
    for labels in sorted(waited.keys() | waiting.keys() | away.keys()):
        seen = waited.get(labels)
        count = sum(seen.counts) if seen is not None else 0
        rows.append(
            {
                "tenant": labels[0],
                "class": labels[1],
                "waiting": int(waiting[labels].value) if labels in waiting else 0,
                "waited": count,
                "mean_wait_s": seen.total / count if seen is not None and count else None,
                "turned_away": int(away[labels].value) if labels in away else 0,
            }
        )
    return rows


def models(at: Moment) -> dict[str, Any]:
    rows = [
        {"id": cid, "provider": candidate.provider, "routes": model_facts(at.live, candidate)}
        for cid, candidate in at.live.plan.candidates.items()
    ]
    return {"models": rows}


def plan(at: Moment) -> dict[str, Any]:
    live = at.live
    current = live.plan
    return {
        "content_hash": current.content_hash,
        "loaded_at": live.loaded_at,
        "source": plan_source(live),
        "ready": live.ready,
        "slots": {"scope": live.slots.scope, "degraded": live.slots.degraded},
        "counts": {
            "aliases": len(current.aliases),
            "providers": len(current.providers),
            "workers": len(current.workers),
            "candidates": len(current.candidates),
        },
        "last_reload": live.last_reload,
    }


def events(at: Moment) -> dict[str, Any]:
    journal, now = at.live.journal, at.now
    rows = [
        {
            "at": when(e.at, now),
            "kind": e.kind,
            "endpoint": e.endpoint,
            "alias": e.alias,
            "candidate": e.candidate,
            "position": e.position,
            "status": e.status,
            "error_class": e.error_class,
            "request_id": e.request_id,
        }
        for e in reversed(journal.events)
    ]
    return {"events": rows, "kept": journal.events.maxlen, "requests": journal.requests}


def budgets(at: Moment) -> dict[str, Any]:
    """Every tenant's and key's credits for the month (``∞``: unlimited), and where usage is kept."""
    from interlock.runtime.usage.credits import budget_report

    ledger = at.live.ledger
    report = budget_report(ledger, at.live.plan.source.access)
    report["store"] = ledger.store.kind
    report["waiting_debits"] = ledger.waiting
    report["last_error"] = ledger.last_error
    return report


SECTIONS: dict[str, Section] = {  # in page order: what the person on call looks at first
    "aliases": aliases,
    "workers": workers,
    "events": events,
    "budgets": budgets,
    "models": models,
    "plan": plan,
}
