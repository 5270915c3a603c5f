"""The fleet as one part: what a plan with workers adds to a gateway, plugged in by its row.

A plan with no workers (no Ollama, llama.cpp, vLLM or SGLang worker, so no telemetry, placement, load
signals or worker choice) runs none of this and never imports it: the gateway's core holds a seat for
the fleet (``services.Current.fleet``, None) and ``features.FLEET`` says whether a plan wants it. The
first plan that has workers (at start, or the reload that brings the first) has ``app/parts.py`` import
this module and call ``plug`` once; the ``Fleet`` it makes outlives later reloads (its books are keyed by
worker names, as the health book's are), and fills the seats the core left:

- the guard chain's ``Kit.fleet``: the slot guard (worker choice, slots, the fleet line, sticky
  sessions, prefix affinity) and the Ollama options guard (placement's ``keep_alive``) read it;
- the router's ``servers`` and ``progress``: the servers that say their own progress, so a call's
  first byte waits on while they do (``signals/progress.py``);
- the probe loop's ``metadata`` and ``signals`` rounds (Ollama's ``/api/ps``..., servers' own load), into
  the fleet's ``LiveFacts``, seated in the core's facts table (``FactsTable.live``: ``fit`` reads it);
- the metrics' ``gauges`` (telemetry) and ``fleet_waiting``; the ops routes' view (``live.fleet``);
- what runs beside the requests: the telemetry loop, placement's warm-up, learned speeds kept in their
  state file (``start``/``stop``, in the lifespan's ``learned speeds`` and ``background loops`` steps);
- the Ollama adapter's final message, which teaches speeds and prompt speeds (``attach``).

Nothing here is per request: what the request path reads of the fleet is what the slot guard reads,
only for a candidate served by workers.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.runtime.base.clock import Clock
from interlock.runtime.base.periodic import Periodic
from interlock.runtime.fleet.line import FleetLine
from interlock.runtime.fleet.live_facts import LiveFacts
from interlock.runtime.fleet.metadata import MetadataFetcher
from interlock.runtime.fleet.placement import PlacementBook, Warmer
from interlock.runtime.fleet.prefix import PrefixIndex
from interlock.runtime.fleet.scoring import Scorer, backend_occupancy
from interlock.runtime.fleet.signals.fetch import SignalFetcher
from interlock.runtime.fleet.signals.progress import ProgressBook
from interlock.runtime.fleet.speeds import SpeedBook, read_state, write_state
from interlock.runtime.fleet.sticky import StickyTable
from interlock.runtime.telemetry.collector import TelemetryBook, TelemetryLoop
from interlock.runtime.telemetry.gauges import families

if TYPE_CHECKING:
    from interlock.runtime.books.facts import FactsTable
    from interlock.runtime.books.health import HealthBook
    from interlock.runtime.books.learned import Learned
    from interlock.runtime.books.metrics import Metrics
    from interlock.runtime.books.probes import ProbeLoop
    from interlock.runtime.loaded.plan import RuntimePlan
    from interlock.runtime.loaded.tables import RoutingSettings, WorkerLimits
    from interlock.runtime.state.base import SlotBackend
    from interlock.runtime.upstream.ollama import OllamaAdapter
    from interlock.runtime.upstream.openai import OpenAIAdapter

log = logging.getLogger("interlock")

SPEEDS_SAVE_INTERVAL_S = 30.0
"""How often learned speeds are written to the state file (when they changed); also at shutdown."""


@dataclass(frozen=True, slots=True)
class Fleet:
    """A gateway's fleet: built once by ``plug``, the first time a plan has workers."""

    telemetry: TelemetryBook  # GPU and memory readings of workers
    facts: LiveFacts  # the workers' live facts and servers' loads (seated in the core's facts table)
    progress: ProgressBook  # whether each server that says its load makes progress
    speeds: SpeedBook  # learned tokens/s, from real requests
    sticky: StickyTable  # session digests -> worker, when sticky sessions are on
    scorer: Scorer  # worker choice, and its last scores
    line: FleetLine  # requests waiting for any of a candidate's workers (one process's slots only)
    placement: PlacementBook  # what stays loaded
    telemetry_loop: TelemetryLoop  # the readings, each health cycle
    warmer: Warmer  # placement's warm-up, after the first probe round: never on the request path
    kept: KeptSpeeds  # learned speeds in their state file
    busy: Callable[[], None]  # told when a worker is full (the probe loop: a down worker may be up)

    def loops(self) -> tuple[Periodic, ...]:
        """What the fleet runs beside the requests, in the order it starts."""
        return (self.telemetry_loop, self.warmer)

    def configure(self, plan: RuntimePlan) -> None:
        """A reload: what the fleet keeps across plans follows the new one's settings."""
        self.speeds.smoothing = plan.routing.speed_smoothing

    def attach(self, ollama: OllamaAdapter | None) -> None:
        """The Ollama adapter's final messages teach output speeds and prompt speeds (what a prefix-cache
        hit is worth): once the upstream client is open."""
        if ollama is None:
            return
        observe_speed, observe_prefill = self.speeds.observe, self.scorer.prefixes.prefill.observe

        def observe(label: str, model: str, final: Mapping[str, Any]) -> None:
            observe_speed(label, model, final)
            observe_prefill(label, model, final)

        ollama.speeds = observe


def plug(
    *,
    plan: Callable[[], RuntimePlan],
    routing: Callable[[], RoutingSettings],
    workers: Callable[[], Mapping[str, WorkerLimits]],
    facts: FactsTable,
    slots: SlotBackend,
    metrics: Metrics,
    health: HealthBook,
    learned: Learned,
    probes: ProbeLoop,
    ollama: Callable[[], OllamaAdapter | None],
    openai: Callable[[], OpenAIAdapter | None],
    speeds_file: Callable[[], Path | None],
    clock: Clock = time.monotonic,
    wall: Clock = time.time,
) -> Fleet:
    """The fleet of one gateway, on the core's books; its rounds, gauges and line handed to the core's
    probe loop and metrics here (the router's and the guards' seats are filled by ``app/parts.py``).
    ``routing`` and ``workers`` are the plan of the moment's, read per request by worker choice: one
    call each, not one through ``plan``."""
    now = plan()
    telemetry = TelemetryBook(wall=wall)
    progress = ProgressBook(clock=clock)
    live = LiveFacts(facts, progress)  # seated in the core's table: ``fit`` reads it there
    speeds = SpeedBook(now.routing.speed_smoothing)
    occupancy = backend_occupancy(slots, workers)
    prefixes = PrefixIndex(prefill=learned.prefill)  # the prompt speeds answers taught: one book
    scorer = Scorer(live, telemetry, speeds, occupancy, clock=clock, wall=wall, prefixes=prefixes)
    line = FleetLine(slots, scorer, routing, workers, clock=clock)
    placement = PlacementBook(live, metrics, clock, telemetry)
    probes.metadata = MetadataFetcher(live, ollama, metrics, clock)
    probes.signals = SignalFetcher(live, openai, metrics, clock)
    metrics.view.gauges = functools.partial(families, telemetry)
    metrics.view.fleet_waiting = line.waiting
    return Fleet(
        telemetry,
        live,
        progress,
        speeds,
        StickyTable(clock=clock),
        scorer,
        line,
        placement,
        TelemetryLoop(plan, telemetry),
        Warmer(plan, placement, health, ollama, probes.first_round, clock),
        KeptSpeeds(speeds, speeds_file),
        probes.busy,
    )


class KeptSpeeds:
    """Learned speeds kept in the state file: read at start, written every ``SPEEDS_SAVE_INTERVAL_S``
    when they changed, and a last time at stop (the file is read anew each time: plans reload)."""

    __slots__ = ("_file", "_speeds", "_task")

    def __init__(self, speeds: SpeedBook, file: Callable[[], Path | None]) -> None:
        self._speeds = speeds
        self._file = file
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        path = self._file()
        if path is not None:
            await asyncio.to_thread(read_state, self._speeds, path)
            self._task = asyncio.ensure_future(self._keep())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        await self.save()

    async def save(self) -> None:
        """Write learned speeds to the state file, off the event loop, when they changed."""
        path = self._file()
        if path is None or not self._speeds.changed:
            return
        try:
            await asyncio.to_thread(write_state, self._speeds, path)
        except OSError as exc:
            self._speeds.changed = True  # try again next time
            log.warning("%s: cannot write learned speeds: %s", path, exc.strerror or exc)

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(SPEEDS_SAVE_INTERVAL_S)
            await self.save()
