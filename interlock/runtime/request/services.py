"""What the layers below the composition root are handed: the request path's services, and a read-only
view of the live state.

Why this boundary: ``parts.build_parts`` builds everything and ``app.Gateway`` dispatches to it; nothing
it builds may reach back into either. The lifecycle and the surfaces get a ``RequestServices`` (the plan
of the moment and its features' hooks, the router, the journal, the metrics, the callers' counters,
the ledger, and of the live state only what the Ollama listing routes show: the gateway's ``Status`` and
the ``FactsTable``); the ops routes and the status page get a ``LiveState`` (what they show, read-only
by convention: they call no method that changes it). Both are built once per gateway and never
replaced; a reload swaps the plan inside ``Current``, which every holder reads when a request starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from interlock.runtime.base.asgi import Scope
    from interlock.runtime.base.clock import Clock
    from interlock.runtime.books.facts import FactsTable
    from interlock.runtime.books.health import HealthBook
    from interlock.runtime.books.journal import Journal
    from interlock.runtime.books.learned import Learned
    from interlock.runtime.books.metrics import Metrics
    from interlock.runtime.books.record import RequestRecord, Span
    from interlock.runtime.books.samples import Samples
    from interlock.runtime.fleet.plug import Fleet
    from interlock.runtime.loaded.callers import Caller
    from interlock.runtime.loaded.plan import RuntimePlan
    from interlock.runtime.request.router import Attempt, Router, Skip
    from interlock.runtime.state.base import SlotBackend
    from interlock.runtime.state.counters import CallerCounters
    from interlock.runtime.usage.base import Tally
    from interlock.runtime.usage.ledger import Ledger


# The lifecycle's extension points (``features``): what a feature's hooks are called with is the
# request's ``lifecycle.Exchange`` (``Any`` here: this module stands below the lifecycle).
Admit = Callable[[Any], Any]  # at ``admit``: returns None, or (``waits``) an awaitable of None
Settle = Callable[[Any, "Tally"], None]  # at ``settle``: the usage of a request an upstream answered
Stake = Callable[["Tally | None"], Awaitable[None]]  # what a feature took for one request, given back
# before the body is read: (services, scope, send, surface, *, route, metered) -> the caller, or None
# when it was refused (and answered)
Authenticate = Callable[..., Awaitable["Caller | None"]]
# what watches a request (the tracing, the audit log): its span begun; the finished record; an audit
# line (``action(name, **fields)``); the router's two (``router.Attempt``, ``router.Skip``)
Begin = Callable[["Scope", "RequestRecord"], "Span"]
Finish = Callable[["RequestRecord"], None]
Action = Callable[..., None]


@dataclass(frozen=True, slots=True)
class Hooks:
    """The features' hooks one plan runs, in table order (``features.Plugged.hooks``, at plan load)."""

    admit: tuple[tuple[Admit, bool], ...] = ()  # (hook, waits)
    settle: tuple[Settle, ...] = ()
    names: tuple[str, ...] = ()  # the features plugged in, for the reader (status, tests)
    authenticate: Authenticate | None = None  # None: every caller is anonymous (`auth: off`)
    begin: Begin | None = None  # None: no span (the router's seats ``attempt``/``skip`` likewise)
    attempt: Attempt | None = None
    skip: Skip | None = None
    finish: tuple[Finish, ...] = ()
    action: Action | None = None  # None: no audit log


NO_HOOKS = Hooks()


class Current:
    """The plan being served and the features it plugs in (``features``, settled at plan load); both
    swapped on reload (``reload.Reloads.apply``). A request reads them once, when it starts, and
    finishes on that plan. Beside them the fleet's seat (``features.FLEET``): None until a plan has
    workers, then the fleet (``fleet/plug.py``), kept across reloads."""

    __slots__ = ("fleet", "hooks", "plan")

    def __init__(self, plan: RuntimePlan) -> None:
        self.plan = plan
        self.hooks = NO_HOOKS  # the plan's features (``features.Plugged.hooks``), swapped with it
        self.fleet: Fleet | None = None


class Status:
    """The gateway's own state as the ops routes show it; written only by its lifespan and its reloads
    (``parts.build_parts``, ``reload.Reloads``)."""

    __slots__ = ("last_reload", "loaded_at", "probed", "source_path", "started")

    def __init__(self, loaded_at: str | None, source_path: str | None) -> None:
        self.loaded_at = loaded_at  # when the current plan was loaded (ISO 8601 UTC)
        self.last_reload: dict[str, Any] | None = None  # the last reload's outcome and changes
        self.source_path = source_path  # the plan file being served, when there is one
        self.started = False
        self.probed: asyncio.Event | None = None  # set after the first probe round (None: no probes)

    @property
    def ready(self) -> bool:
        """Started, and (with probes on) the first probe round is done."""
        return self.started and (self.probed is None or self.probed.is_set())


@dataclass(frozen=True, slots=True)
class LiveState:
    """What the ops routes and the status page read: the live state, as the gateway keeps it."""

    current: Current
    status: Status
    health: HealthBook
    slots: SlotBackend
    facts: FactsTable  # live Ollama metadata, windows learned from overflows
    ledger: Ledger  # usage and budgets
    metrics: Metrics
    journal: Journal  # the recent-events ring
    samples: Samples  # the status page's pictures
    wall: Clock
    learned: Learned | None = None  # prompt counts and prompt speeds, learned from answers

    @property
    def plan(self) -> RuntimePlan:
        return self.current.plan

    @property
    def fleet(self) -> Fleet | None:
        """The fleet (telemetry, learned speeds, worker choice, the fleet line, sticky sessions,
        placement); None while no plan served had workers."""
        return self.current.fleet

    @property
    def ready(self) -> bool:
        return self.status.ready

    @property
    def loaded_at(self) -> str | None:
        return self.status.loaded_at

    @property
    def last_reload(self) -> dict[str, Any] | None:
        return self.status.last_reload


@dataclass(frozen=True, slots=True)
class RequestServices:
    """What the request lifecycle and the surfaces' handlers use: handed to every handler."""

    current: Current
    router: Router
    journal: Journal  # the access log and the events ring
    metrics: Metrics
    counters: Callable[[], CallerCounters]  # keys' and tenants' rates (``runtime/state``): made when asked
    ledger: Ledger  # credits checked before, usage debited after
    status: Status  # when the plan was loaded, for the routes that list what is served (Ollama's /api/tags)
    facts: FactsTable  # live Ollama metadata, for the routes that show it (Ollama's /api/show, /api/ps)
    learned: Learned  # what each answer teaches: prompt counts and prompt speeds per endpoint and model

    @property
    def plan(self) -> RuntimePlan:
        return self.current.plan
