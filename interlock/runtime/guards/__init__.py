"""Pre-candidate guards: the checks the router runs, in order, before it calls a candidate.

A guard looks at one candidate and the request and either lets it through (possibly narrowing the routes
it may use, or settling on one and holding a slot there) or names a short reason to skip it. Skipping
costs no network time. Guards that hold a resource (a slot) go last, so a later skip never strands one.
In order: ``CapabilityGuard`` and ``ContextGuard`` (what the request needs against what the candidate
can do: a skip here is a *misfit*, recorded in the request's ``Preflight``), ``HealthGuard`` (circuits,
endpoint health), ``SlotGuard`` (worker choice, slot admission), then ``OllamaOptionsGuard``, which
never skips and only settles what the chosen Ollama worker is sent (``num_ctx``, ``think``).
A guard may also answer ``DEFER``: the router comes back to the candidate after the rest of the chain
(the context guard's, for a candidate the request fits only with a lowered output limit or by its
server's own count).

The chain is a table: ``GUARDS`` names each guard's module, in order, and each module's ``guard(kit)``
builds its guard from the gateway's parts (a ``Kit``); ``chain`` builds them once per gateway
(``parts.build_parts``). The chain is compiled: each guard names what must hold of a candidate for it
to apply at all (``check``, a ``tables.Check``), the plan settles per candidate which hold
(``Candidate.checks``, at
plan load), and ``compiled`` makes, once, the chain of guards for each combination. The router runs a
candidate's chain by one tuple index: a cloud candidate's holds neither the slot guard (no worker to
choose, no slot) nor the Ollama options guard, and with preflight off none of the preflight's. Every
guard but the slot guard is an ``InstantGuard`` (it never waits): the router calls its ``verdict``
as it is (``steps``), with no coroutine made for it.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from interlock.runtime.guards.preflight import Preflight
from interlock.runtime.loaded.tables import Candidate, Check, Route

if TYPE_CHECKING:
    from interlock.runtime.books.facts import FactsTable
    from interlock.runtime.books.health import HealthBook
    from interlock.runtime.books.learned import CountBook
    from interlock.runtime.books.metrics import Metrics
    from interlock.runtime.fleet.plug import Fleet
from interlock.runtime.state.base import Lease, SlotBackend

DEFER = "defer"  # a guard's answer: try this candidate again after the rest of the chain (not a skip)


@dataclass(slots=True)
class Admission:
    """What the guards settled for one candidate of one request, and the slot it holds.

    The router makes it before the guards run and calls ``release`` once the call (and, for a stream,
    the writing of it) is over, however that ends (a ``finally``): the one place a held slot is given
    back.
    """

    candidate: Candidate
    routes: tuple[Route, ...]  # still eligible; guards narrow it
    preflight: Preflight | None = None  # the request's needs and findings (one per request)
    route: Route | None = None  # the one to call, once chosen
    body: Mapping[str, Any] | None = None  # what this candidate is sent, when not the caller's body
    lease: Lease | None = None  # held slot, given back when the ``async with`` block ends
    queued_s: float = 0.0  # time spent waiting for a slot
    spill: float | None = None  # worker full: skip to the next candidate when the expected wait (s)
    # exceeds this (0: at once); None: queue
    has_next: bool = False  # a later candidate exists (a worker's own `fallback` needs one)
    ceiling: int | None = None  # the output limit this candidate is sent, lowered to fit its window

    async def release(self) -> None:
        """Give the held slot back, if any (idempotent)."""
        lease, self.lease = self.lease, None
        if lease is not None:
            await lease.release()


class Guard(abc.ABC):
    """One check before a candidate is called."""

    check: ClassVar[Check] = Check.EVERY  # what must hold of a candidate for it to apply (``Check``)

    @abc.abstractmethod
    async def admit(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        """None to go on; ``DEFER`` to be asked again after the rest of the chain; else a short,
        stable reason to skip the candidate (a metric label)."""


class InstantGuard(Guard):
    """A guard that never waits (it reads tables, it holds nothing): the router calls its ``verdict``
    directly, so it costs no coroutine per request; ``admit`` is the same answer, awaited."""

    @abc.abstractmethod
    def verdict(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        """As ``admit``."""

    async def admit(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        return self.verdict(admission, body)


Step = tuple[Callable[[Admission, Mapping[str, Any]], Any], bool]
"""One guard of a compiled chain: what to call, and whether to await it (a guard that may wait)."""

Chains = tuple[tuple[Guard, ...], ...]
"""Indexed by a candidate's ``checks``: the guards of its chain, in order."""


def compiled(guards: tuple[Guard, ...]) -> Chains:
    """The chain of ``guards`` (in their order) for every combination of checks: those whose check holds."""
    every = sum(Check)  # every check's bit set
    return tuple(tuple(g for g in guards if g.check & checks) for checks in range(every + 1))


def steps(chain: tuple[Guard, ...]) -> tuple[Step, ...]:
    """``chain`` as the router runs it: an instant guard's ``verdict`` called, any other's ``admit``
    awaited."""
    return tuple((g.verdict, False) if isinstance(g, InstantGuard) else (g.admit, True) for g in chain)


# -- the chain, as a table -------------------------------------------------------------------------

GUARDS: tuple[str, ...] = (
    "interlock.runtime.guards.capability",  # misfits first: no slot is queued for a request that cannot fit
    "interlock.runtime.guards.context_fit",
    "interlock.runtime.guards.circuit",
    "interlock.runtime.guards.slots",  # holds a slot: after every guard that may skip
    "interlock.runtime.guards.ollama_options",  # never skips: settles what the chosen worker is sent
)
"""The guard chain, in order: each module has ``guard(kit) -> Guard``. A guard that holds a resource
goes after every guard that may skip, so a later skip never strands it."""

FLEET_GUARDS = frozenset({"interlock.runtime.guards.slots", "interlock.runtime.guards.ollama_options"})
"""The guards built from the fleet (``Kit.fleet``): left out of the chain (never imported) while the
gateway has no fleet, a plan without workers (their checks, ``WORKERS`` and ``OLLAMA``, hold of no
candidate of it)."""


@dataclass(frozen=True, slots=True)
class Kit:
    """The gateway's parts the guards are built from (``parts.build_parts`` makes it once)."""

    facts: FactsTable
    metrics: Metrics
    health: HealthBook
    counts: CountBook  # how servers count prompts, as their answers taught
    slots: SlotBackend
    fleet: Fleet | None = None  # worker choice, the fleet line, placement (None: no plan had workers)


def chain(kit: Kit, table: tuple[str, ...] = GUARDS) -> tuple[Guard, ...]:
    """The guards of ``table``, built from ``kit``, in order (never per request): without a fleet, none
    of the fleet's (``FLEET_GUARDS``)."""
    paths = table if kit.fleet is not None else tuple(p for p in table if p not in FLEET_GUARDS)
    return tuple(importlib.import_module(path).guard(kit) for path in paths)
