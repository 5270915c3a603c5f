"""What-if: which candidate each alias would answer with if some workers or providers were down or full.

Pure and offline: it reads a routing plan, never a gateway. It walks each chain the way the runtime's
router does: a candidate is skipped when every worker behind it is down (a provider down takes all its
workers); the first one left answers. A candidate whose workers are all *saturated* (every slot taken)
does not fall back: the runtime queues the request there and answers 429 once the queue is full or the
wait runs out (chain order is the operator's preference, a busy worker is back-pressure). So a saturated
candidate ends the walk with "queues", as in production.

Capabilities lost: an alias left with no candidate loses every capability it ``requires``; across the
plan, a capability that some candidate offered before and no reachable candidate offers after is lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from interlock.schema.plan import RoutingPlan


class UnknownPart(Exception):
    """A name given to ``--down``/``--saturated`` that is neither a worker nor a provider of the plan."""


@dataclass(frozen=True, slots=True)
class Scenario:
    down: frozenset[str] = frozenset()  # worker or provider names
    saturated: frozenset[str] = frozenset()

    @staticmethod
    def parse(plan: RoutingPlan, down: Iterable[str], saturated: Iterable[str]) -> Scenario:
        """Comma-separated names, each checked against the plan's workers and providers."""
        known = set(plan.workers) | set(plan.providers)
        names = {"down": _split(down), "saturated": _split(saturated)}
        for option, given in names.items():
            unknown = sorted(given - known)
            if unknown:
                listed = ", ".join(sorted(known)) or "none"
                raise UnknownPart(
                    f"--{option}: {', '.join(f'`{n}`' for n in unknown)} is not a worker or provider of "
                    f"this plan (known: {listed})"
                )
        return Scenario(frozenset(names["down"]), frozenset(names["saturated"]))


def _split(values: Iterable[str]) -> set[str]:
    return {name.strip() for value in values for name in value.split(",") if name.strip()}


@dataclass(frozen=True, slots=True)
class Step:
    candidate: str
    state: str  # "answers" | "queues" | "down" | "not reached"
    why: str | None = None  # the parts that make it so


@dataclass(frozen=True, slots=True)
class AliasOutcome:
    name: str
    requires: tuple[str, ...]
    before: str | None  # the candidate that answers with everything up
    answers: str | None  # the candidate that answers (or queues) in the scenario
    queues: bool  # the answering candidate's workers are all saturated: requests wait there, then 429
    steps: tuple[Step, ...]
    lost: tuple[str, ...] = field(default=())  # required capabilities no candidate is left to offer

    @property
    def servable(self) -> bool:
        return self.answers is not None


@dataclass(frozen=True, slots=True)
class Outcome:
    plan_hash: str
    scenario: Scenario
    aliases: tuple[AliasOutcome, ...]
    capabilities_lost: tuple[str, ...]

    @property
    def unservable(self) -> list[str]:
        return [a.name for a in self.aliases if not a.servable]

    def as_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan_hash,
            "down": sorted(self.scenario.down),
            "saturated": sorted(self.scenario.saturated),
            "unservable": self.unservable,
            "capabilities_lost": list(self.capabilities_lost),
            "aliases": [
                {
                    "name": a.name,
                    "servable": a.servable,
                    "answers": a.answers,
                    "queues": a.queues,
                    "before": a.before,
                    "requires": list(a.requires),
                    "capabilities_lost": list(a.lost),
                    "chain": [{"candidate": s.candidate, "state": s.state, "why": s.why} for s in a.steps],
                }
                for a in self.aliases
            ],
        }


def simulate(plan: RoutingPlan, scenario: Scenario, aliases: Sequence[str] | None = None) -> Outcome:
    """Every alias (or those named) under ``scenario``."""
    names = list(plan.aliases) if aliases is None else list(aliases)
    outcomes = tuple(_alias(plan, name, scenario) for name in names)
    return Outcome(plan.content_hash, scenario, outcomes, _capabilities_lost(plan, scenario))


def _parts(plan: RoutingPlan, cid: str) -> list[set[str]]:
    """Per route of a candidate, the names that take that route down: its worker and its provider."""
    provider = plan.providers[plan.candidates[cid].provider]
    if not provider.workers:
        return [{provider.name}]
    return [{worker, provider.name} for worker in provider.workers]


def _state(plan: RoutingPlan, cid: str, scenario: Scenario) -> tuple[str, str | None]:
    routes = _parts(plan, cid)
    up = [r for r in routes if not r & scenario.down]
    if not up:
        hit = sorted({name for r in routes for name in r & scenario.down})
        return "down", ", ".join(hit)
    free = [r for r in up if not r & scenario.saturated]
    if not free:
        hit = sorted({name for r in up for name in r & scenario.saturated})
        return "queues", ", ".join(hit)
    return "answers", None


def _alias(plan: RoutingPlan, name: str, scenario: Scenario) -> AliasOutcome:
    alias = plan.aliases[name]
    chain = alias.candidates
    steps: list[Step] = []
    answers: str | None = None
    queues = False
    for cid in chain:
        if answers is not None:
            steps.append(Step(cid, "not reached"))
            continue
        state, why = _state(plan, cid, scenario)
        steps.append(Step(cid, state, why))
        if state != "down":
            answers, queues = cid, state == "queues"
    lost = tuple(alias.requires) if answers is None else ()
    return AliasOutcome(
        name, tuple(alias.requires), chain[0] if chain else None, answers, queues, tuple(steps), lost
    )


def _capabilities_lost(plan: RoutingPlan, scenario: Scenario) -> tuple[str, ...]:
    before: set[str] = set()
    after: set[str] = set()
    for cid, candidate in plan.candidates.items():
        caps = set(candidate.capabilities or ())
        before |= caps
        if _state(plan, cid, scenario)[0] != "down":
            after |= caps
    return tuple(sorted(before - after))


def render_text(outcome: Outcome) -> str:
    scenario = outcome.scenario
    down = ", ".join(sorted(scenario.down)) or "nothing"
    lines = [f"what if down: {down}" + _saturated(scenario) + f" (plan {outcome.plan_hash})"]
    for a in outcome.aliases:
        lines.append("")
        if a.answers is None:
            head = f"{a.name}: NO CANDIDATE LEFT"
            if a.lost:
                head += f" (requires {', '.join(a.lost)}: lost)"
        elif a.queues:
            head = f"{a.name}: queues at {a.answers} (saturated; 429 once its queue is full)"
        elif a.answers == a.before:
            head = f"{a.name}: {a.answers} (as now)"
        else:
            head = f"{a.name}: {a.answers} (instead of {a.before})"
        lines.append(head)
        for number, step in enumerate(a.steps, start=1):
            why = f" ({step.why})" if step.why else ""
            lines.append(f"  {number}. {step.candidate}: {step.state}{why}")
    lines.append("")
    unservable = outcome.unservable
    if outcome.capabilities_lost:
        lines.append(f"capabilities no reachable candidate offers: {', '.join(outcome.capabilities_lost)}")
    if unservable:
        count = f"{len(unservable)} of {len(outcome.aliases)}"
        lines.append(f"{count} aliases would have no candidate: {', '.join(unservable)}")
    else:
        total = len(outcome.aliases)
        lines.append(
            "it would still have a candidate"
            if total == 1
            else f"all {total} aliases would still have a candidate"
        )
    return "\n".join(lines) + "\n"


def _saturated(scenario: Scenario) -> str:
    return f"; saturated: {', '.join(sorted(scenario.saturated))}" if scenario.saturated else ""
