"""Placement at runtime: the plan's placement re-packed with what the gateway learns, and warm-up.

The compiler placed the models whose size was declared, ranked by where aliases use them
(``compiler/homes.py``). Outside the request path, every warm-up round, ``PlacementBook.refresh``
packs again with the same rule (``interlock.common.packing.pack``) and two things the compiler could not know:

- **sizes**: a model with no declared size takes what a worker reported for it (``FactsTable.size``:
  ``/api/ps``'s ``size_vram``, else ``/api/tags``'s size on disk);
- **memory**: a worker whose memory the plan does not know takes its telemetry's total VRAM (or
  unified memory) times ``avoid_vram_percent``, once its readings came (``TelemetryBook``);
- **traffic**: the requests each candidate answered (``interlock_alias_resolved``), as a count that halves
  every ``HALF_LIFE_S`` (an hour). Models are ranked by its binary order of magnitude first (0 for none,
  1 for about one request an hour, 6 for one a minute: ``log2(1 + count)``, rounded down), then
  by the plan's rank. A model used every minute outranks one used daily; two models of about the same
  traffic keep the plan's order, so noise does not reshuffle homes (and reload models) every round.

``Warmer`` (a ``Periodic`` loop, one round every ``health.probe_interval``, the first once the first
probe round is done, so never before the gateway could serve) then loads, with ``routing.placement.warm``
on, the homes' models that a worker does not hold when it *starts* being served (the first round it
answers ``/api/ps``) and after it *restarted* (it was seen down, or its ``/api/ps`` went from some models
to none: a restarted Ollama lists nothing), until each is loaded. A home that worker choice's own loads
evicted later is not loaded back: that would evict what those requests needed, round after round
(measured: ``bench/fleet.py --workload interactive`` went from 15 loads to 104 when every round
reloaded missing homes). One load at a time per worker (loads compete for the same memory and disk),
workers in parallel; a worker that did not answer ``/api/ps`` is left for a later round, and a model is
loaded again only once a newer ``/api/ps`` still misses it. A worker that restarts again within
``RESTART_WINDOW_S`` of its last restart is crash-looping (perhaps on the very load): its next warm-up
waits twice as long each time (``probe_interval`` x 2, x 4, ... at most ``MAX_WARM_HOLD_S``), so a
worker that flaps every second is loaded a few times, not once a flap; one that stays up for the
window starts afresh. The load is Ollama's own
(``OllamaAdapter.load``: ``POST /api/generate`` without a prompt) with the plan's ``keep_alive`` and the
``num_ctx`` the gateway's requests would send there (``fit.effective_context``), so the first real
request does not reload it. Embedding-only models are not warmed (``/api/generate`` refuses them; they
load on first use).

Pinned: a request the gateway sends to a model on one of its homes carries the plan's ``keep_alive``
unless the caller set one (``keep_alive``, read by the Ollama options guard: one dictionary lookup),
because Ollama resets a model's timer to its default (5 minutes) on every request that names none.

Nothing here is on the request path but that lookup; ``pins`` is replaced whole, never changed.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from interlock.common.packing import Packing, Want, pack
from interlock.runtime.base.errors import UpstreamError
from interlock.runtime.base.periodic import Periodic
from interlock.runtime.books.fit import capabilities_on, effective_context
from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.fleet.live_facts import LiveFacts
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.loaded.tables import PlacedModel, worker_label
from interlock.runtime.telemetry.collector import TelemetryBook
from interlock.runtime.upstream.ollama import OllamaAdapter

log = logging.getLogger("interlock.common.packing")
GIB = 1024**3
HALF_LIFE_S = 3600.0
Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Home:
    """One model kept loaded on one worker, and what the last warm-up round found."""

    candidate: str
    model: str
    footprint_gib: float
    size_source: str  # "declared" or "reported"
    state: str  # cold, warming, warmed, loaded, not loaded, failed (<class>), not installed, worker down, ...


def traffic_class(count: float) -> int:
    """``count`` requests (halving every hour) as a binary order of magnitude: 0 none, 6 one a minute."""
    return int(math.log2(1.0 + max(count, 0.0)))


class PlacementBook:
    """The placement of the moment (the plan's, re-packed with live sizes and traffic) and the pins."""

    def __init__(
        self,
        facts: LiveFacts,
        metrics: Metrics,
        clock: Clock = time.monotonic,
        telemetry: TelemetryBook | None = None,
    ) -> None:
        self.facts = facts
        self.metrics = metrics
        self.telemetry = telemetry
        self.clock = clock
        self.pins: Mapping[tuple[str, str], int] = {}
        """(worker label, model as /api/ps names it) -> keep_alive seconds; read per request."""
        self.homes: Mapping[str, tuple[Home, ...]] = {}  # worker name -> its homes, most wanted first
        self.homeless: tuple[str, ...] = ()
        self.budgets: Mapping[str, tuple[float, str]] = {}  # worker -> (GiB, "plan" or "telemetry")
        self.traffic: dict[str, float] = {}  # candidate -> requests, halving every HALF_LIFE_S
        self._seen: dict[str, float] = {}  # candidate -> answered, at the last refresh
        self._at: float | None = None
        self._states: dict[tuple[str, str], str] = {}  # (worker, candidate) -> warm-up state

    def keep_alive(self, label: str, model: str) -> int | None:
        """The ``keep_alive`` a request to ``model`` on worker ``label`` carries; None: not a home."""
        return self.pins.get((label, model)) if self.pins else None

    def refresh(self, plan: RuntimePlan) -> None:
        """Learn the traffic since the last call and pack again (outside the request path)."""
        self._learn()
        section = plan.placement
        order = {m.candidate: index for index, m in enumerate(section.models)}
        ranked = sorted(
            section.models,
            key=lambda m: (-traffic_class(self.traffic.get(m.candidate, 0.0)), order[m.candidate]),
        )
        self.budgets = self._budgets(plan)
        sizes: dict[str, dict[str, tuple[float, str]]] = {}
        for placed in ranked:
            sizes[placed.candidate] = self._footprints(plan, placed)
        wants = [
            Want(m.candidate, {w: gib for w, (gib, _) in sizes[m.candidate].items()})
            for m in ranked
            if sizes[m.candidate]
        ]
        packing = pack({w: gib for w, (gib, _) in self.budgets.items()}, wants)
        self._publish(plan, packing, {m.candidate: m for m in ranked}, sizes)

    def _budgets(self, plan: RuntimePlan) -> dict[str, tuple[float, str]]:
        """Worker -> (GiB placement may fill, where its memory came from): the plan's, else telemetry's."""
        budgets = {w: (gib, "plan") for w, gib in plan.placement.budgets_gib.items()}
        if self.telemetry is None:
            return budgets
        providers = {m.provider for m in plan.placement.models}
        share = plan.routing.avoid_vram_percent / 100
        for name, limits in plan.workers.items():
            state = self.telemetry.workers.get(name)
            if name in budgets or limits.provider not in providers or state is None:
                continue
            total = state.vram()[1]
            if total:
                budgets[name] = (round(total / GIB * share, 3), "telemetry")
        return budgets

    def _footprints(self, plan: RuntimePlan, placed: PlacedModel) -> dict[str, tuple[float, str]]:
        """Worker -> (GiB, where it came from), for the workers of its provider whose memory is known."""
        reported = self.facts.size(placed.facts_key)
        out: dict[str, tuple[float, str]] = {}
        for worker in self.budgets:
            limits = plan.workers.get(worker)
            if limits is None or limits.provider != placed.provider:
                continue
            declared = placed.footprint_gib.get(worker)
            if declared is not None:
                out[worker] = (declared, "declared")
            elif reported is not None:
                out[worker] = (round(reported / GIB, 3), "reported")
        return out

    def _publish(
        self,
        plan: RuntimePlan,
        packing: Packing,
        models: Mapping[str, PlacedModel],
        sizes: Mapping[str, Mapping[str, tuple[float, str]]],
    ) -> None:
        homes: dict[str, tuple[Home, ...]] = {}
        pins: dict[tuple[str, str], int] = {}
        for worker, placed in packing.homes.items():
            rows = []
            for cid in placed:
                gib, source = sizes[cid][worker]
                state = self._states.get((worker, cid), "cold")
                rows.append(Home(cid, models[cid].model, gib, source, state))
                if plan.placement.warm:
                    label = worker_label(models[cid].provider, worker)
                    pins[(label, models[cid].facts_key)] = plan.placement.keep_alive_s
            homes[worker] = tuple(rows)
        self.homes, self.pins, self.homeless = homes, pins, packing.homeless

    def _learn(self) -> None:
        now = self.clock()
        answered: dict[str, float] = {}
        for (_alias, candidate), child in list(self.metrics.alias_resolved.children.items()):
            answered[candidate] = answered.get(candidate, 0.0) + child.value
        decay = 1.0 if self._at is None else 0.5 ** ((now - self._at) / HALF_LIFE_S)
        for candidate in set(answered) | set(self.traffic):
            new = answered.get(candidate, 0.0) - self._seen.get(candidate, 0.0)
            self.traffic[candidate] = self.traffic.get(candidate, 0.0) * decay + max(new, 0.0)
        self._seen, self._at = answered, now

    def shown(self, plan: RuntimePlan) -> bool:
        """Whether reports show placement: warm-up on, or some worker's memory known (plan or telemetry),
        for a plan with models to place."""
        if not plan.placement.models:
            return False
        self.packed(plan)
        return plan.placement.warm or bool(self.budgets)

    def packed(self, plan: RuntimePlan) -> None:
        """Pack now if no round has yet (what the reports show before the first warm-up round)."""
        if self._at is None:
            self.refresh(plan)

    def note(self, worker: str, candidate: str, state: str) -> None:
        """The warm-up's finding for one home (shown in reports; the next refresh carries it)."""
        self._states[(worker, candidate)] = state
        rows = self.homes.get(worker)
        if rows is not None:
            self.homes = {
                **self.homes,
                worker: tuple(
                    Home(h.candidate, h.model, h.footprint_gib, h.size_source, state)
                    if h.candidate == candidate
                    else h
                    for h in rows
                ),
            }

    def report(self, plan: RuntimePlan) -> dict[str, Any]:
        """JSON-ready, for /v1/health and the status page: names, sizes, states, traffic; nothing secret.
        Before the first warm-up round, it packs once itself, so the homes show from the start."""
        self.packed(plan)
        section = plan.placement
        return {
            "warm": section.warm,
            "keep_alive_s": section.keep_alive_s,
            "budgets_gib": {w: gib for w, (gib, _) in self.budgets.items()},
            "budget_sources": {w: source for w, (_, source) in self.budgets.items()},
            "homes": {
                worker: [
                    {
                        "candidate": h.candidate,
                        "model": h.model,
                        "footprint_gib": h.footprint_gib,
                        "size_source": h.size_source,
                        "state": h.state,
                        "compiled": h.candidate in section.homes.get(worker, ()),
                    }
                    for h in rows
                ]
                for worker, rows in self.homes.items()
            },
            "homeless": list(self.homeless),
            "traffic": {c: round(n, 2) for c, n in sorted(self.traffic.items()) if n >= 0.01},
        }


RESTART_WINDOW_S = 300.0
"""Restarts of a worker closer together than this are one crash loop: its warm-ups back off."""
MAX_WARM_HOLD_S = 600.0
"""The longest a crash-looping worker's warm-up waits."""


class Warmer(Periodic):
    """Loads every home's model the worker does not hold (see the module docstring)."""

    task_name = "interlock-warmup"
    log = log
    failed = "warm-up round failed"

    def __init__(
        self,
        plan: Callable[[], RuntimePlan],
        book: PlacementBook,
        health: HealthBook,
        adapter: Callable[[], OllamaAdapter | None],
        probed: asyncio.Event,
        clock: Clock = time.monotonic,
    ) -> None:
        self.plan = plan
        self.book = book
        self.health = health
        self._adapter = adapter
        self.metrics = book.metrics
        self.probed = probed
        self.clock = clock
        self._tried: dict[tuple[str, str], float] = {}  # (label, model) -> when the last load was sent
        self._pending: dict[str, set[str]] = {}  # label -> homes (as /api/ps names them) still to load
        self._listed: dict[str, int] = {}  # label -> models its last /api/ps listed; absent: never seen up
        self._down: set[str] = set()  # labels seen down since they were last warmed
        self._restarts: dict[str, tuple[float, int]] = {}  # label -> (last restart, restarts in a row)
        self._hold: dict[str, float] = {}  # label -> no warm-up load before this (a crash loop)

    def pause_s(self) -> float:
        return self.plan().health.probe_interval_s

    async def round(self) -> None:
        await self.probed.wait()
        await self.warm_all()

    async def warm_all(self) -> None:
        """One round: re-pack, then (warm-up on) load what is missing, one worker per task."""
        plan = self.plan()
        self.book.refresh(plan)
        adapter = self._adapter()
        if not plan.placement.warm or adapter is None:
            return
        jobs = [self._worker(plan, adapter, worker, homes) for worker, homes in self.book.homes.items()]
        await asyncio.gather(*jobs)

    async def _worker(
        self, plan: RuntimePlan, adapter: OllamaAdapter, worker: str, homes: tuple[Home, ...]
    ) -> None:
        limits = plan.workers[worker]
        label = worker_label(limits.provider, worker)
        facts = self.book.facts.worker(label)
        if not self.health.endpoint_usable(label) or facts.loaded is None:
            if not self.health.endpoint_usable(label):
                self._down.add(label)  # when it answers again, it may have restarted: warm it then
            for home in homes:
                self.book.note(worker, home.candidate, "worker down" if label in self._down else "not known")
            return
        listed, before = len(facts.loaded), self._listed.get(label)
        if before is None or label in self._down or (listed == 0 and before > 0):  # start or restart
            self._pending[label] = {plan.candidates[h.candidate].facts_key for h in homes}
            if before is not None:
                self._restarted(label, plan.health.probe_interval_s)
        self._listed[label] = listed
        self._down.discard(label)
        pending = self._pending.setdefault(label, set())
        held = self._hold.get(label, 0.0) > self.clock()
        for home in homes:
            state = self._decide(plan, label, home, pending)
            if state is None and held:
                state = f"held back (the worker restarted {self._restarts[label][1] + 1} times in a row)"
            if state is not None:
                self.book.note(worker, home.candidate, state)
                continue
            await self._load(plan, adapter, worker, label, home)

    def _restarted(self, label: str, pause_s: float) -> None:
        """A restart seen: within ``RESTART_WINDOW_S`` of the last one, the next warm-up waits longer."""
        now = self.clock()
        last = self._restarts.get(label)
        streak = last[1] + 1 if last is not None and now - last[0] < RESTART_WINDOW_S else 0
        self._restarts[label] = (now, streak)
        if streak:
            self._hold[label] = now + min(MAX_WARM_HOLD_S, pause_s * 2**streak)
        else:
            self._hold.pop(label, None)

    def _decide(self, plan: RuntimePlan, label: str, home: Home, pending: set[str]) -> str | None:
        """The state to report without loading, or None: load it now. Only what the worker's start or
        restart left to load is loaded: a home that worker choice's own loads evicted since is left to
        it (loading it back would evict what those requests needed, round after round)."""
        facts = self.book.facts.worker(label)
        key = plan.candidates[home.candidate].facts_key
        assert facts.loaded is not None
        if key in facts.loaded:
            pending.discard(key)
            return "loaded"
        candidate = plan.candidates[home.candidate]
        route = next((r for r in candidate.routes if r.endpoint.label == label), None)
        caps = capabilities_on(route, candidate, self.book.facts.table) if route is not None else None
        if route is None or (caps is not None and "embedding" in caps and "completion" not in caps):
            pending.discard(key)
            return "loads on first use"
        if key not in pending:
            return "not loaded"
        if facts.installed is not None and key not in facts.installed:
            pending.discard(key)
            return "not installed"
        tried = self._tried.get((label, key))
        if tried is not None and (facts.loaded_at is None or facts.loaded_at <= tried):
            return home.state  # no /api/ps since the last load: wait for one
        return None

    async def _load(
        self, plan: RuntimePlan, adapter: OllamaAdapter, worker: str, label: str, home: Home
    ) -> None:
        candidate = plan.candidates[home.candidate]
        route = next(r for r in candidate.routes if r.endpoint.label == label)
        num_ctx, _ = effective_context(route, candidate, self.book.facts.table)
        self._tried[(label, candidate.facts_key)] = self.clock()
        self.book.note(worker, home.candidate, "warming")
        try:
            await adapter.load(route.endpoint, candidate.model, plan.placement.keep_alive_s, num_ctx)
        except UpstreamError as exc:
            self.book.note(worker, home.candidate, f"failed ({exc.error_class})")
            self.metrics.warmups.labels(label, exc.error_class).inc()
            log.warning("warm-up: %s on %s failed (%s)", candidate.model, label, exc.error_class)
            return
        self.book.note(worker, home.candidate, "warmed")
        self.metrics.warmups.labels(label, "ok").inc()
        log.info("warm-up: %s loaded on %s", candidate.model, label)
