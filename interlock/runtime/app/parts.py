"""The one factory of a gateway's parts: ``build_parts`` builds each part once, after what it needs, and
hands them down as views (``RequestServices`` to the request path, ``LiveState`` to the ops app);
``app.Gateway`` only dispatches to them. Building (which part gets which, in which order, what outlives
a reload) is one job, dispatching another. What runs beside the requests is one ordered list
(``lifespan_of``: started in order, stopped in reverse); reloads are ``reload.Reloads``. Tests and
benches reach a part through ``Parts``, never through the gateway's attributes. The fleet
(``features.FLEET``, ``fleet/plug.py``) is not built here: ``FleetSeat`` plugs it the first time a plan
has workers, so a plan without them never imports it.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from interlock.runtime.app.reload import READ_TIMEOUT_S, PlanSource, Reloads, ReloadSummary
from interlock.runtime.base import gc_policy
from interlock.runtime.base.clock import Clock, iso_utc
from interlock.runtime.base.lifespan import Lifespan, Step
from interlock.runtime.base.periodic import Periodic
from interlock.runtime.books.facts import FactsTable
from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.journal import Journal
from interlock.runtime.books.learned import CountBook, Learned, PrefillBook
from interlock.runtime.books.learned_kept import KeptLearned
from interlock.runtime.books.metrics import Metrics, StateView
from interlock.runtime.books.probes import ProbeLoop
from interlock.runtime.books.recovery import RecoveryChecks
from interlock.runtime.books.samples import Samples
from interlock.runtime.features import FLEET, NO_SETTINGS, Plugged, Settings
from interlock.runtime.guards import Kit, chain
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.ops.on_demand import OpsApp
from interlock.runtime.request.route_table import RouteTable, route_table
from interlock.runtime.request.router import Router
from interlock.runtime.request.services import Current, Hooks, LiveState, RequestServices, Status
from interlock.runtime.state.base import SlotBackend
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.upstream.base import Adapter, KindAdapters
from interlock.runtime.usage.ledger import Ledger
from interlock.runtime.usage.memory import MemoryStore

if TYPE_CHECKING:
    from interlock.runtime.fleet.plug import Fleet
    from interlock.runtime.upstream.ollama import OllamaAdapter
    from interlock.runtime.upstream.openai import OpenAIAdapter
    from interlock.runtime.wire.base import Endpoint

log = logging.getLogger("interlock")

AdapterOpener = Callable[[Metrics], Awaitable[tuple[Mapping[str, Adapter], Callable[[], Awaitable[None]]]]]
"""Opens the upstream client (counting into the gateway's metrics): ``(adapters by kind, close)``;
called once, at startup. The default's adapters are a ``KindAdapters``: made for the kinds each plan
names, when it loads (``Upstream.want``); a test's opener may hand a plain mapping of them all."""


async def open_default_adapters(
    metrics: Metrics,
) -> tuple[Mapping[str, Adapter], Callable[[], Awaitable[None]]]:
    """One shared transport (``net/transport.py::TRANSPORTS``: the own client, net/client.py, unless
    ``INTERLOCK_TRANSPORT`` names another) behind the adapter of every kind a plan names."""
    from interlock.runtime.net.transport import opener

    strays, health = metrics.upstream_strays, metrics.view.health

    def on_stray(label: str, seconds: float) -> None:  # counted, and said in /v1/health
        strays.labels(label).inc()
        health.reuse_off(label, seconds)

    name = os.environ.get("INTERLOCK_TRANSPORT") or "own"
    transport = opener(name)
    if name != "own":
        log.warning("INTERLOCK_TRANSPORT=%s: upstream requests go through %s (debugging)", name, name)
    client = transport(resends=metrics.upstream_resends.labels, on_stray=on_stray)
    return KindAdapters(client), client.aclose


@dataclass(frozen=True, slots=True)
class Loops:
    """The core's background loops, in the order they start (the fleet's, ``Fleet.loops``, start after
    them); a test runs one round of one by hand (``probes.probe_all()``, ``samples.take()``)."""

    probes: ProbeLoop  # health probes (and, with a fleet, Ollama metadata and servers' load signals)
    samples: Samples  # the status page's pictures

    def all(self) -> tuple[Periodic, ...]:
        return (self.probes, self.samples)


@dataclass(frozen=True, slots=True)
class Parts:
    """A gateway's parts for one plan (and its successors after reloads), built once by ``build_parts``."""

    services: RequestServices  # what every handler of the request path gets
    live: LiveState  # the live state as the ops app reads it: plan, status, books, fleet, ledger, metrics
    admin: OpsApp  # the ops routes (the cold endpoints), on ``live``: built by the first that is asked
    routes: RouteTable  # the surface routes, dispatched by one lookup
    loops: Loops  # the background loops (also in ``lifespan``)
    lifespan: Lifespan  # everything started at startup in order, stopped at shutdown in reverse
    reloads: Reloads  # reading the plan again and swapping it in


def build_parts(
    plan: RuntimePlan,
    *,
    source: PlanSource | None = None,
    open_adapters: AdapterOpener = open_default_adapters,
    probes: bool = True,
    clock: Clock = time.monotonic,
    wall: Clock = time.time,
    reload_timeout_s: float = READ_TIMEOUT_S,
    access_log: BinaryIO | None = None,
    state_dir: str | None = None,
    slots: SlotBackend | None = None,
    ledger: Ledger | None = None,
    settings: Settings = NO_SETTINGS,
    reload_summary: ReloadSummary | None = None,
) -> Parts:
    """Every part of a gateway for ``plan``. ``probes=False`` leaves the background loops unstarted (a
    test runs their rounds by hand); ``slots`` and ``ledger`` are the serve options' (else this process's
    slot table and an in-memory ledger); ``settings`` the serve settings the feature table reads
    (``--audit-log``, ``--otel``)."""
    current = Current(plan)
    routes = route_table(plan.source.server.surfaces)  # the surfaces the plan serves: imported now
    upstream = Upstream(open_adapters)  # the adapters by kind: opened at startup (``lifespan``)
    path = getattr(source, "path", None)
    status = Status(iso_utc(wall()), str(path) if path is not None else None)
    live, learned = _live(current, status, slots, ledger, access_log, clock, wall)
    loops = _loops(live, upstream, clock)
    if probes:
        status.probed = loops.probes.first_round
    # the request path: the guard chain (``guards.GUARDS``), the router, the features (``features``)
    router = Router(live.health, (), upstream.adapters, live.metrics, live.facts, learned)
    fleet = functools.partial(_fleet, live, learned, loops, upstream, state_dir, clock, wall)
    kit = functools.partial(Kit, live.facts, live.metrics, live.health, learned.counts, live.slots)
    seat = FleetSeat(current, router, settings, fleet, kit, probes)
    seat.want(plan)  # the fleet, when the plan has workers; the guard chain, built from what is there
    counters = live.slots.caller_counters  # made when a feature asks (the budgets' row)
    services = RequestServices(
        current, router, live.journal, live.metrics, counters, live.ledger, status, live.facts, learned
    )
    features = Plugged(services, settings)  # the feature table's rows, plugged in as they are wanted
    _seat(current, router, features.hooks(plan))
    swap = functools.partial(_swap, live, features, seat, upstream, routes, router)
    reloads = Reloads(
        source, swap, current, status, live.metrics, wall, summary=reload_summary, timeout_s=reload_timeout_s
    )
    kept = functools.partial(state_file, state_dir, current, "learned.json", ".learned.json")
    taught = KeptLearned(learned, kept, live.slots.shared_learning())
    lifespan = lifespan_of(live, features, loops, reloads, upstream, taught, seat, probes=probes)
    return Parts(services, live, OpsApp(live), routes, loops, lifespan, reloads)


def _live(
    current: Current,
    status: Status,
    slots: SlotBackend | None,
    ledger: Ledger | None,
    access_log: BinaryIO | None,
    clock: Clock,
    wall: Clock,
) -> tuple[LiveState, Learned]:
    """The books: the state that outlives reloads (keyed by ids and worker names) and what is counted
    and logged, built once per gateway (the fleet's are the fleet's, ``fleet/plug.py``)."""
    plan = current.plan
    health = HealthBook(plan.health, clock=clock, wall=wall)
    slots = slots if slots is not None else MemorySlots()
    slots.configure(plan.workers)
    slots.share_health(health)
    ledger = ledger if ledger is not None else Ledger(MemoryStore(), wall=wall)
    facts = FactsTable()
    metrics = Metrics(StateView(_served(current), health, slots, ledger=ledger))  # (audit: its row's)
    learned = Learned(CountBook(wall=wall, clock=clock), PrefillBook(wall=wall), facts)  # (Ollama's
    learned.configure(endpoints_of(plan))  # speeds: its adapter); endpoints on one server learn together
    journal, samples = Journal(access_log=access_log), Samples(slots, metrics, wall=wall)
    live = LiveState(
        current, status, health, slots, facts, ledger, metrics, journal, samples, wall, learned=learned
    )
    return live, learned


def _served(current: Current) -> Callable[[], RuntimePlan]:
    return lambda: current.plan


def _loops(live: LiveState, upstream: Upstream, clock: Clock) -> Loops:
    served, health, metrics = _served(live.current), live.health, live.metrics
    recovery = RecoveryChecks(served, health, upstream.adapters, metrics, clock=clock)  # open circuits
    probe_loop = ProbeLoop(served, health, upstream.adapters, metrics, recovery=recovery, clock=clock)
    health.opened = probe_loop.wake  # a circuit that opens is checked within seconds, not next round
    return Loops(probe_loop, live.samples)


def _fleet(
    live: LiveState,
    learned: Learned,
    loops: Loops,
    upstream: Upstream,
    state_dir: str | None,
    clock: Clock,
    wall: Clock,
) -> Fleet:
    """The fleet plugged on the core's books (``fleet/plug.py``: imported now)."""
    current = live.current
    plug: Callable[..., Fleet] = importlib.import_module(FLEET.module).plug
    return plug(
        plan=_served(current),
        routing=lambda: current.plan.routing,
        workers=lambda: current.plan.workers,
        facts=live.facts,
        slots=live.slots,
        metrics=live.metrics,
        health=live.health,
        learned=learned,
        probes=loops.probes,
        ollama=upstream.ollama,
        openai=upstream.openai,
        speeds_file=functools.partial(state_file, state_dir, current, "speeds.json"),
        clock=clock,
        wall=wall,
    )


@dataclass(slots=True, eq=False)
class FleetSeat:
    """The fleet's row (``features.FLEET``) seated in the core: ``want`` plugs the fleet the first time a
    plan has workers (at start, or at the reload that brings the first) and hands it to the core's seats:
    ``Current.fleet`` (the ops view), the guard chain (``Kit.fleet``: the slot and Ollama options
    guards), the router's ``servers`` and ``progress``. Once plugged it stays: its books are keyed by
    worker names, as the health book is, and a later plan without workers reads none of it."""

    current: Current
    router: Router
    settings: Settings
    plug: Callable[[], Fleet]
    kit: Callable[[Fleet | None], Kit]  # what the guard chain is built from
    probes: bool
    chained: bool = False
    # the lifespan's steps this seat runs, once started (and until stopped): a fleet plugged later
    # (a reload, maybe while the gateway still starts) starts what they would have started
    keeping: bool = False  # ``learned speeds``
    looping: bool = False  # ``background loops`` (with ``probes``)
    reading: asyncio.Future[None] | None = None  # a plug's read (a reference kept meanwhile)

    def want(self, plan: RuntimePlan) -> None:
        """At plan load: the fleet plugged if ``plan`` is the first with workers, and the guard chain
        built from what is there; a fleet plugged after the lifespan's ``learned speeds`` or ``background
        loops`` step started starts its part of them now."""
        current, router = self.current, self.router
        fleet = self.plug() if current.fleet is None and FLEET.wanted(plan, self.settings) else None
        if fleet is not None or not self.chained:
            # the chain built before anything is seated: a guard that fails to build leaves no fleet
            # without its guards (the reload is refused; the next plan with workers plugs it again)
            guards = chain(self.kit(fleet if fleet is not None else current.fleet))
            if fleet is not None:
                current.fleet = fleet
                router.servers, router.progress = fleet.progress.servers, fleet.progress
            router.rechain(guards)
            self.chained = True
        if fleet is None:
            return
        if self.keeping:  # off the event loop; ``stop_speeds`` awaits it before the last write
            self.reading = asyncio.ensure_future(fleet.kept.start())
        if self.looping:
            for loop in fleet.loops():
                loop.start()

    # -- the lifespan's steps (``lifespan_of``): the fleet's part, with or without a fleet yet ----------

    async def start_speeds(self) -> None:
        """``learned speeds``: the state file read (once: a fleet plugged from now on reads it then)."""
        self.keeping = True
        if self.current.fleet is not None:
            await self.current.fleet.kept.start()

    async def stop_speeds(self) -> None:
        """Written a last time, after a read still running (else the read's speeds would be lost)."""
        self.keeping = False
        reading, self.reading = self.reading, None
        if reading is not None:
            await reading
        if self.current.fleet is not None:
            await self.current.fleet.kept.stop()

    def start_loops(self) -> None:
        """``background loops``: the fleet's (a fleet plugged from now on starts them then)."""
        self.looping = self.probes
        if self.looping and self.current.fleet is not None:
            for loop in self.current.fleet.loops():
                loop.start()

    async def stop_loops(self) -> None:
        """All of the fleet's (a test may have run a round by hand)."""
        self.looping = False
        if self.current.fleet is not None:
            for loop in reversed(self.current.fleet.loops()):
                await loop.stop()


def _swap(
    live: LiveState,
    features: Plugged,
    seat: FleetSeat,
    upstream: Upstream,
    routes: RouteTable,
    router: Router,
    plan: RuntimePlan,
) -> None:
    """A reload: the plan's features settled, its providers' kinds given adapters (and, the first time
    it has workers, the fleet plugged in) and its surfaces routed, then what outlives the plan is
    configured for it and it is replaced whole. What may fail (a module imported now) comes first and
    changes nothing the plan being served reads, so a failure (``Reloads.reload`` refuses the plan)
    leaves that plan whole: its hooks, its routes."""
    health, learned = live.health, live.learned
    hooks = features.hooks(plan)  # at plan load: its features, imported now if new
    upstream.want(plan)  # its kinds' adapters, imported now if new (one more is read by no old plan)
    live.slots.configure(plan.workers)  # the new workers' slots (no pool is dropped), before the fleet
    seat.want(plan)  # the fleet, if this is the first plan with workers (its parts started if due)
    routes.serve(plan.source.server.surfaces)  # its surfaces' rows, imported now if new (else unchanged)
    health.configure(plan.health)
    health.unprobed(e.label for p in plan.providers.values() if not p.probe for e in p.endpoints)
    if learned is not None:
        learned.configure(endpoints_of(plan))
    _seat(live.current, router, hooks)
    if live.fleet is not None:
        live.fleet.configure(plan)
        live.fleet.attach(upstream.ollama())  # an Ollama adapter this plan's kinds brought
    live.current.plan = plan
    gc_policy.thaw()  # the replaced plan may have been frozen at start: let it be collected


def _seat(current: Current, router: Router, hooks: Hooks) -> None:
    """A plan's hooks where the lifecycle reads them, and the router's seats (the tracing's)."""
    router.attempt, router.skip = hooks.attempt, hooks.skip
    current.hooks = hooks


def lifespan_of(
    live: LiveState,
    features: Plugged,
    loops: Loops,
    reloads: Reloads,
    upstream: Upstream,
    taught: KeptLearned,
    seat: FleetSeat,
    *,
    probes: bool,
) -> Lifespan:
    """What runs beside the requests, in the order it starts (stopped in reverse at shutdown); the
    fleet's parts (its speeds file, its loops) run by its seat, with or without a fleet yet (one plugged
    while the gateway starts, or later, starts them when it is plugged)."""
    status, ledger = live.status, live.ledger

    async def start_ledger() -> None:
        await ledger.start()  # a ledger that cannot be read stops the start (budgets need it)
        if ledger.store.kind == "memory" and live.plan.keys is not None and _any_budget(live.plan):
            log.warning(
                "usage is kept in memory only: credits hold per process and start again at every start "
                "(give --state-dir DIR or --usage-url URL to keep them)"
            )

    async def open_upstream() -> None:
        await upstream.start(live.metrics)
        upstream.want(live.plan)  # the plan of now: a reload may have landed while the client opened
        if live.fleet is not None:
            live.fleet.attach(upstream.ollama())

    async def start_loops() -> None:  # probes, samples; then the fleet's telemetry and warm-up
        if probes:
            for loop in loops.all():
                loop.start()
        seat.start_loops()

    async def stop_loops() -> None:  # all of them: a test may have run a round by hand
        await seat.stop_loops()
        for loop in reversed(loops.all()):
            await loop.stop()

    async def started(value: bool = True) -> None:  # /v1/health may say ready
        status.started = value

    return Lifespan(
        (
            # the audit log's writer task; at shutdown what is queued written, the last spans exported
            Step("features", features.start, features.stop),
            Step("usage ledger", start_ledger, ledger.close),  # the last debits committed at shutdown
            Step("slots", live.slots.start, live.slots.close),
            Step("upstream client", open_upstream, upstream.stop),
            Step("learned speeds", seat.start_speeds, seat.stop_speeds),  # the fleet's state file
            # counts and prompt speeds read (file, shared store), kept on a timer; pushed, written last
            Step("learned counts and prompt speeds", taught.start, taught.stop),
            Step("reloads", stop=reloads.stop),  # reloads in flight cancelled
            Step("background loops", start_loops, stop_loops),
            Step("status", started, functools.partial(started, False)),
        )
    )


class Upstream:
    """The upstream adapters by kind (the one dictionary the router and the probes hold): empty until
    ``start`` opens the client (``AdapterOpener``); ``stop`` closes it."""

    __slots__ = ("_close", "_open", "_opened", "adapters")

    def __init__(self, open_adapters: AdapterOpener) -> None:
        self.adapters: dict[str, Adapter] = {}
        self._open = open_adapters
        self._opened: Mapping[str, Adapter] = {}
        self._close: Callable[[], Awaitable[None]] | None = None

    async def start(self, metrics: Metrics) -> None:
        """The client opened; the adapters come with ``want`` (the plan served once it is open)."""
        self._opened, self._close = await self._open(metrics)

    def want(self, plan: RuntimePlan) -> None:
        """The adapters of the kinds ``plan`` names (their modules imported now, at plan load)."""
        opened = self._opened
        if isinstance(opened, KindAdapters):
            opened.want((p.kind for p in plan.providers.values()), plan.source.server.surfaces)
        self.adapters.update(opened)

    async def stop(self) -> None:
        close, self._close = self._close, None
        if close is not None:
            await close()

    def ollama(self) -> OllamaAdapter | None:
        adapter = self.adapters.get("ollama")
        if adapter is None:  # no plan named the kind: its module is not imported
            return None
        from interlock.runtime.upstream.ollama import OllamaAdapter  # imported with the adapter

        return adapter if isinstance(adapter, OllamaAdapter) else None

    def openai(self) -> OpenAIAdapter | None:
        adapter = self.adapters.get("openai")
        if adapter is None:
            return None
        from interlock.runtime.upstream.openai import OpenAIAdapter

        return adapter if isinstance(adapter, OpenAIAdapter) else None


def _any_budget(plan: RuntimePlan) -> bool:
    """Whether a key or tenant has credits (``usage.credits``: imported for a plan with keys only)."""
    from interlock.runtime.usage.credits import any_budget

    return any_budget(plan.source.access)


def endpoints_of(plan: RuntimePlan) -> list[Endpoint]:
    return [endpoint for provider in plan.providers.values() for endpoint in provider.endpoints]


def state_file(state_dir: str | None, current: Current, name: str, suffix: str | None = None) -> Path | None:
    """Where the state ``name`` is kept: in ``--state-dir``, else the plan's ``routing.state_file``
    (the speeds), or beside it with ``suffix`` (``speeds.json`` -> ``speeds.learned.json``)."""
    if state_dir is not None:
        return Path(state_dir) / name
    named = current.plan.routing.state_file
    if not named:
        return None
    return Path(named) if suffix is None else Path(named).with_suffix(suffix)
