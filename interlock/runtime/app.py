"""The composition root: ``Gateway`` builds the runtime's parts for one plan, owns the lifespan and
reloads, and is the ASGI application.

What it hands down is two objects (``services``): ``RequestServices`` to every handler of the request
path and ``LiveState`` to the ops app; nothing below this module names ``Gateway``. Surface endpoints
(the rows of ``route_table``) are dispatched by one dictionary lookup straight to their raw ASGI
handlers (``lifecycle``, which authenticates first); everything else goes to the FastAPI app of
``ops.admin``, after ``lifecycle.admitted`` when the path needs a key. The plan is swapped as a whole on
reload (``Current``); a request reads it once and finishes on that plan.
Health state and slot pools outlive reloads (they are keyed by ids and worker names). Slots live in a
``SlotBackend`` (``runtime/state``): this process's table by default, the supervisor's with ``--workers
N``. When the plan turns CORS on, a request's ``Origin`` is looked up first (``serving.cors``):
preflights are answered there, and answers to allowed origins gain the CORS headers built when the plan
loaded. Gateways are made by ``commands/gateway.py``'s ``build_gateway``, the one factory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from interlock.runtime.access import needs_key
from interlock.runtime.asgi import Message, Receive, Scope, Send, closing, has_body, send_json
from interlock.runtime.audit import AuditLog
from interlock.runtime.audit.keys import access_changes
from interlock.runtime.clock import Clock, iso_utc
from interlock.runtime.fleet.facts import FactsTable
from interlock.runtime.fleet.line import FleetLine
from interlock.runtime.fleet.metadata import MetadataFetcher
from interlock.runtime.fleet.placement import PlacementBook, Warmer
from interlock.runtime.fleet.probes import ProbeLoop
from interlock.runtime.fleet.scoring import Scorer, backend_occupancy
from interlock.runtime.fleet.signals.fetch import SignalFetcher
from interlock.runtime.fleet.speeds import SpeedBook, read_state, write_state
from interlock.runtime.fleet.sticky import StickyTable
from interlock.runtime.guards import Guard
from interlock.runtime.guards.calibration import CountBook
from interlock.runtime.guards.capability import CapabilityGuard
from interlock.runtime.guards.context import ContextGuard
from interlock.runtime.guards.health import HealthGuard
from interlock.runtime.guards.ollama_options import OllamaOptionsGuard
from interlock.runtime.guards.slots import SlotGuard
from interlock.runtime.health import HealthBook
from interlock.runtime.journal import Journal
from interlock.runtime.learned import Learned
from interlock.runtime.lifecycle import Handler, admitted
from interlock.runtime.metrics import Metrics, StateView
from interlock.runtime.ops.admin import build_admin
from interlock.runtime.periodic import Periodic
from interlock.runtime.plan import PlanError, RuntimePlan
from interlock.runtime.reload import READ_TIMEOUT_S, StagedSource, read_in_child
from interlock.runtime.route_table import route_table
from interlock.runtime.router import Router
from interlock.runtime.samples import Samples
from interlock.runtime.services import Current, LiveState, RequestServices, Status
from interlock.runtime.serving import gc_policy
from interlock.runtime.state.base import SlotBackend
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.surfaces.base import Failure
from interlock.runtime.surfaces.openai import ChatCompletions
from interlock.runtime.telemetry.collector import TelemetryBook, TelemetryLoop
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.upstream.ollama import OllamaAdapter
from interlock.runtime.upstream.openai import OpenAIAdapter
from interlock.runtime.usage.base import UsageStoreError
from interlock.runtime.usage.credits import any_budget
from interlock.runtime.usage.ledger import Ledger
from interlock.runtime.usage.memory import MemoryStore

if TYPE_CHECKING:
    from interlock.runtime.tracing.otel import Tracing

log = logging.getLogger("interlock")

ReloadSummary = Callable[[RuntimePlan, RuntimePlan], Mapping[str, Any]]
"""What a reload changed, for ``/v1/health`` and the status page: ``{"changes": [...], "changes_total": n}``,
worked out (off the event loop) by whoever composes the gateway (``commands/gateway.py``: ``interlock
diff``'s semantic diff); the runtime itself never imports the diff."""

NO_SUMMARY: Mapping[str, Any] = {"changes": [], "changes_total": 0}

PlanSource = Callable[[], RuntimePlan]
"""Reads the plan again (file, or config compiled anew) with the credentials read at start. One that is
also a ``reload.StagedSource`` reads in a child process on reload (``interlock serve``'s loader is)."""

AdapterOpener = Callable[[Metrics], Awaitable[tuple[Mapping[str, Adapter], Callable[[], Awaitable[None]]]]]
"""Opens the upstream client (counting into the gateway's metrics): ``(adapters by kind, close)``;
called once, at startup."""

SPEEDS_SAVE_INTERVAL_S = 30.0
"""How often learned speeds are written to the state file (when they changed); also at shutdown."""


async def open_default_adapters(
    metrics: Metrics,
) -> tuple[Mapping[str, Adapter], Callable[[], Awaitable[None]]]:
    """One shared upstream client (runtime/upstream/client.py) behind every kind's adapter."""
    from interlock.kinds import PROVIDER_KINDS
    from interlock.runtime.upstream.client import UpstreamClient, adapter_for

    client = UpstreamClient.create(resends=metrics.upstream_resends.labels)
    return {kind: adapter_for(kind, client) for kind in PROVIDER_KINDS}, client.aclose


class Gateway:
    """The ASGI application for one plan (and its successors after reloads)."""

    def __init__(
        self,
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
        audit: AuditLog | None = None,
        tracing: Tracing | None = None,
        reload_summary: ReloadSummary | None = None,
    ) -> None:
        self.current = Current(plan)
        self.source = source
        self.reload_summary = reload_summary
        self.reload_timeout_s = reload_timeout_s
        self.wall = wall
        self.health = HealthBook(plan.health, clock=clock, wall=wall)
        self.slots = slots if slots is not None else MemorySlots()
        self.counters = self.slots.caller_counters()  # keys' and tenants' rates (runtime/state)
        self.slots.configure(plan.workers)
        self.slots.share_health(self.health)
        self.telemetry = TelemetryBook(wall=wall)
        self.ledger = ledger if ledger is not None else Ledger(MemoryStore(), wall=wall)  # usage, credits
        self.audit = audit  # the audit log (``--audit-log``), when on
        self.tracing = tracing  # OpenTelemetry spans (``--otel``), when on
        view = StateView(
            lambda: self.plan,
            self.health,
            self.slots,
            self.telemetry,
            audit,
            lambda candidate: self.fleet.waiting(candidate),  # the fleet line is made below
            self.ledger,
        )
        self.metrics = Metrics(view)
        self.adapters: dict[str, Adapter] = {}
        self.facts = FactsTable()  # live Ollama metadata: read-only outside the metadata fetcher
        self.speeds = SpeedBook(plan.routing.speed_smoothing)  # learned tokens/s, from real requests
        self.state_dir = state_dir
        self.sticky = StickyTable(clock=clock)  # session digests -> worker, when sticky sessions are on
        self.scorer = Scorer(
            self.facts,
            self.telemetry,
            self.speeds,
            backend_occupancy(self.slots, lambda: self.plan.workers),
            clock=clock,
            wall=wall,
        )
        self.fleet = FleetLine(
            self.slots, self.scorer, lambda: self.plan.routing, lambda: self.plan.workers, clock=clock
        )  # requests waiting for any of a candidate's workers (one process's slots only)
        self.placement = PlacementBook(self.facts, self.metrics, clock, self.telemetry)  # what stays loaded
        # prompt counts and speeds per endpoint and model, from answers (Ollama's speeds: its adapter)
        self.learned = Learned(CountBook(), self.scorer.prefixes.prefill)
        guards: tuple[Guard, ...] = (
            CapabilityGuard(self.facts, self.metrics),
            ContextGuard(self.facts, self.metrics, self.learned.counts),
            HealthGuard(self.health),
            SlotGuard(
                self.slots, self.scorer, lambda: self.plan.routing, self.sticky, self.fleet, self.metrics
            ),
            OllamaOptionsGuard(self.facts, self.placement.keep_alive),
        )
        self.router = Router(
            self.health, guards, self.adapters, self.metrics, tracing, self.facts, self.learned
        )
        self.metadata = MetadataFetcher(self.facts, self._ollama_adapter, self.metrics, clock)
        self.signals = SignalFetcher(self.facts, self._openai_adapter, self.metrics, clock)
        self.probe_loop = ProbeLoop(
            lambda: self.plan, self.health, self.adapters, self.metrics, self.metadata, signals=self.signals
        )
        self.telemetry_loop = TelemetryLoop(lambda: self.plan, self.telemetry)
        self.warmer = Warmer(
            lambda: self.plan,
            self.placement,
            self.health,
            self._ollama_adapter,
            self.probe_loop.first_round,
            clock,
        )  # placement's warm-up, after the first probe round: never on the request path
        self.journal = Journal(access_log=access_log, audit=audit)  # the JSON access log, when on
        self.samples = Samples(self.slots, self.metrics, wall=wall)
        path = getattr(source, "path", None)
        self.status = Status(iso_utc(wall()), str(path) if path is not None else None)
        if probes:
            self.status.probed = self.probe_loop.first_round
        self.live = LiveState(
            self.current,
            self.status,
            self.health,
            self.slots,
            self.telemetry,
            self.facts,
            self.speeds,
            self.scorer,
            self.fleet,
            self.sticky,
            self.ledger,
            self.metrics,
            self.journal,
            self.samples,
            wall,
            placement=self.placement,
            learned=self.learned,
        )
        self.services = RequestServices(
            self.current,
            self.router,
            self.journal,
            self.metrics,
            self.counters,
            self.ledger,
            tracing,
            audit,
            self.live,
            self.learned,
        )
        self.admin = build_admin(self.live)
        # the background loops: started together after the adapters (with probes on), stopped together
        # (all of them: a test may have run a round of one by hand)
        self._loops: tuple[Periodic, ...] = (self.probe_loop, self.telemetry_loop, self.warmer, self.samples)
        self._probes = probes
        self._open_adapters = open_adapters
        self._close_adapters: Callable[[], Awaitable[None]] | None = None
        self._reload_lock = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()
        table = route_table()
        self._routes: Mapping[tuple[str, str], Handler] = table.handlers
        self._paths = table.paths
        self._metered = table.metered
        self._admin_errors = ChatCompletions()  # the admin routes answer errors in OpenAI's shape

    def _ollama_adapter(self) -> OllamaAdapter | None:
        adapter = self.adapters.get("ollama")
        return adapter if isinstance(adapter, OllamaAdapter) else None

    def _openai_adapter(self) -> OpenAIAdapter | None:
        adapter = self.adapters.get("openai")
        return adapter if isinstance(adapter, OpenAIAdapter) else None

    @property
    def speeds_file(self) -> Path | None:
        """Where learned speeds are kept: ``--state-dir`` first, else the plan's ``routing.state_file``."""
        if self.state_dir is not None:
            return Path(self.state_dir) / "speeds.json"
        named = self.plan.routing.state_file
        return Path(named) if named else None

    async def save_speeds(self) -> None:
        """Write learned speeds to the state file, off the event loop, when they changed."""
        path = self.speeds_file
        if path is None or not self.speeds.changed:
            return
        try:
            await asyncio.to_thread(write_state, self.speeds, path)
        except OSError as exc:
            self.speeds.changed = True  # try again next time
            log.warning("%s: cannot write learned speeds: %s", path, exc.strerror or exc)

    async def _keep_speeds(self) -> None:
        while True:
            await asyncio.sleep(SPEEDS_SAVE_INTERVAL_S)
            await self.save_speeds()

    @property
    def plan(self) -> RuntimePlan:
        """The plan being served now."""
        return self.current.plan

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            plan = self.current.plan
            if plan.cors is not None:
                admitted_origin = await plan.cors.admit(scope, send, plan.plan_header)
                if admitted_origin is None:  # a preflight, answered
                    return
                send = admitted_origin
            path = scope["path"]
            handler = self._routes.get((scope["method"], path))
            if handler is not None and path in self._metered:  # the lifecycle authenticates first
                await handler(self.services, scope, receive, send)
                return
            row = self._paths.get(path)
            if plan.keys is not None and needs_key(path):  # `auth: off` skips this at once
                surface = row[1] if row is not None else self._admin_errors
                known = row is not None
                if not await admitted(self.services, scope, send, surface, route=known, metered=False):
                    return
            if handler is not None:
                await handler(self.services, scope, receive, send)
            elif row is not None:
                await self._method_not_allowed(scope, closing(send) if has_body(scope) else send)
            else:
                admin_send = self._with_plan_header(send)
                await self.admin(scope, receive, closing(admin_send) if has_body(scope) else admin_send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "websocket":  # only under a server that loads a WebSocket library: refuse (403)
            await send({"type": "websocket.close", "code": 1008})

    async def _method_not_allowed(self, scope: Scope, send: Send) -> None:
        methods, surface = self._paths[scope["path"]]
        allowed = ", ".join(methods)
        message = f"{scope['method']} {scope['path']}: Method Not Allowed (use {allowed})"
        payload = surface.error(Failure(405, message, "invalid_request_error", None, "405"))
        headers = [self.plan.plan_header, (b"allow", allowed.encode())]
        await send_json(send, 405, payload, headers)

    # -- lifecycle ----------------------------------------------------------------------------------

    async def startup(self) -> None:
        await self.ledger.start()  # a ledger that cannot be read stops the start (budgets need it)
        if self.ledger.store.kind == "memory" and any_budget(self.plan.source.access):
            log.warning(
                "usage is kept in memory only: credits hold per process and start again at every start "
                "(give --state-dir DIR or --usage-url URL to keep them)"
            )
        if self.audit is not None:
            self.audit.start()
        await self.slots.start()
        adapters, close = await self._open_adapters(self.metrics)
        self.adapters.update(adapters)
        self._close_adapters = close
        ollama = self._ollama_adapter()
        if ollama is not None:
            speeds, prefill = self.speeds.observe, self.scorer.prefixes.prefill.observe

            def observe(label: str, model: str, final: Mapping[str, Any]) -> None:
                speeds(label, model, final)
                prefill(label, model, final)  # prompt timings: what a prefix-cache hit is worth

            ollama.speeds = observe
        path = self.speeds_file
        if path is not None:
            await asyncio.to_thread(read_state, self.speeds, path)
            self._spawn(self._keep_speeds())
        if self._probes:
            for loop in self._loops:
                loop.start()
        self.status.started = True

    async def shutdown(self) -> None:
        self.status.started = False
        for loop in self._loops:
            await loop.stop()
        for task in list(self._background):
            task.cancel()
        await self.save_speeds()
        if self._close_adapters is not None:
            await self._close_adapters()
            self._close_adapters = None
        await self.slots.close()
        await self.ledger.close()  # the last debits are committed before the process ends
        if self.audit is not None:
            await self.audit.close()
        if self.tracing is not None:
            await self.tracing.close()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except UsageStoreError as exc:  # a store that cannot be opened: its message says why
                    log.error("startup failed: %s", exc)
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                except Exception as exc:
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- reload -------------------------------------------------------------------------------------

    def request_reload(self) -> None:
        """For a SIGHUP handler on the event loop: reload in the background."""
        self._spawn(self.reload())

    def _spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def reload(self) -> bool:
        """Read the plan again; swap it in when sound, else keep serving the old one (logged, counted)."""
        async with self._reload_lock:
            if self.source is None:
                log.warning("reload requested, but this gateway was not given a plan file to reload")
                return False
            log.debug("reload: reading the plan again")
            try:
                plan = await self._read_plan(self.source)
            except PlanError as exc:
                return self._refused(str(exc))
            except Exception as exc:  # anything else from reading or compiling: refuse, keep serving
                return self._refused(f"{type(exc).__name__}: {exc}")
            old = self.plan
            self.apply(plan)
            self.metrics.plan_reloads.labels("loaded").inc()
            summary = self.reload_summary
            self.status.last_reload = last = {
                "at": iso_utc(self.wall()),
                "result": "loaded",
                "error": None,
                "from": old.content_hash,
                "to": plan.content_hash,
                **(await asyncio.to_thread(summary, old, plan) if summary is not None else NO_SUMMARY),
            }
            log.info("plan reloaded: %s -> %s", old.content_hash, plan.content_hash)
            if self.audit is not None:
                changes = last["changes_total"]
                self.audit.action(
                    "reload",
                    outcome="loaded",
                    from_plan=old.content_hash,
                    to_plan=plan.content_hash,
                    changes=changes,
                )
                for action, fields in access_changes(old.source.access, plan.source.access):
                    self.audit.action(action, **fields)
            return True

    async def _read_plan(self, source: PlanSource) -> RuntimePlan:
        """Off the event loop: a staged source reads (compiles) in a child process, then loads in a
        thread; any other source runs in a thread."""
        if isinstance(source, StagedSource):
            data = await read_in_child(source.read, self.reload_timeout_s)
            return await asyncio.to_thread(source.load, data)
        return await asyncio.to_thread(source)

    def apply(self, plan: RuntimePlan) -> None:
        """Swap the plan in; requests already running keep the one they started with."""
        self.health.configure(plan.health)
        self.health.unprobed(e.label for p in plan.providers.values() if not p.probe for e in p.endpoints)
        self.slots.configure(plan.workers)
        self.speeds.smoothing = plan.routing.speed_smoothing
        self.current.plan = plan
        self.status.loaded_at = iso_utc(self.wall())
        gc_policy.thaw()  # the replaced plan may have been frozen at start: let it be collected

    def _refused(self, reason: str) -> bool:
        log.error("plan reload refused; still serving %s: %s", self.plan.content_hash, reason)
        self.metrics.plan_reloads.labels("refused").inc()
        self.status.last_reload = {
            "at": iso_utc(self.wall()),
            "result": "refused",
            "error": reason,
            "from": self.plan.content_hash,
            "to": None,
            "changes": [],
            "changes_total": 0,
        }
        if self.audit is not None:
            self.audit.action(
                "reload", outcome="refused", from_plan=self.plan.content_hash, to_plan=None, error=reason
            )
        return False

    def _with_plan_header(self, send: Send) -> Send:
        header = self.plan.plan_header

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        return send_with_header
