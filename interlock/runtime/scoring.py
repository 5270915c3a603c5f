"""Worker scoring: order the routes (workers) of one candidate by what is known about them right now.

Every input is gathered outside the request path and read here with dictionary lookups:

- ``loaded``: the model is in the worker's ``/api/ps`` (``FactsTable``), or this gateway sent it there
  since that list was fetched (a model sent is a model loaded, or loading, until ``/api/ps`` says
  otherwise); a worker whose ``/api/ps`` is unknown gets no guess either way;
- ``installed``: the model is in the worker's ``/api/tags``;
- ``free_slots`` / ``queue``: free slots for the model (and on the worker), and the requests this one
  would wait behind: those waiting, itself when no slot is free, and, when the model would have to be
  loaded, those running there (Ollama's load waits for room, and what arrives after it waits behind
  it); read through one accessor (``Occupancy``) so the slot backend can change behind it;
- ``speed``: learned output tokens/s for (worker, model) (``SpeedBook``; real requests only);
- ``vram`` / ``gpu_util``: VRAM in use and GPU utilisation from telemetry (declared workers only);
- ``avoid_load``: a hard penalty for a worker that would have to load the model while its VRAM use is
  at or above ``avoid_vram_percent``.

score = loaded·w + installed·w + free·w − ahead·w + tokens/s·w − vram_fraction·w − util_fraction·w
        − (avoid_load when it applies).

A candidate with one route, or of an OpenAI-compatible provider, is not scored (nothing to choose).
Ties keep the plan's worker order. The last score of each worker and its parts are kept for
``/v1/health`` (one small tuple per route scored).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from interlock.runtime.facts import FactsTable
from interlock.runtime.health import Clock, iso_utc
from interlock.runtime.plan import Candidate, Route, RoutingSettings, WorkerLimits
from interlock.runtime.speeds import SpeedBook
from interlock.runtime.state import SlotBackend
from interlock.runtime.telemetry.collector import TelemetryBook

Occupancy = Callable[[str, str, int], tuple[int, int, int]]
"""``(worker, model, slot limit) -> (free slots for that model there, requests waiting there, requests
running there)``."""

MAX_SENT = 4096
PARTS = ("loaded", "installed", "free_slots", "queue", "speed", "vram", "gpu_util", "avoid_load")


def backend_occupancy(slots: SlotBackend, workers: Callable[[], Mapping[str, WorkerLimits]]) -> Occupancy:
    """The slot backend as an ``Occupancy``: the one place scoring reads slot state. It reads this
    process's share (``SlotBackend.local``, no I/O): with a shared store, other processes' requests
    are not counted here, and the backend still enforces the whole limit."""

    def occupancy(worker: str, model: str, limit: int) -> tuple[int, int, int]:
        share = slots.local(worker)
        limits = workers().get(worker)
        most = limits.max_concurrent if limits is not None else limit
        free = min(limit - share.per_model.get(model, 0), most - share.in_use)
        return max(free, 0), share.waiting, share.in_use

    return occupancy


@dataclass(frozen=True, slots=True)
class Scored:
    """One worker's last score for one model, with its parts (in ``PARTS`` order) and when (wall)."""

    model: str
    score: float
    parts: tuple[float, ...]
    at: float

    def report(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "score": round(self.score, 2),
            "parts": {name: round(value, 2) for name, value in zip(PARTS, self.parts, strict=True)},
            "at": iso_utc(self.at),
        }


class Scorer:
    """Orders a candidate's routes, best first; remembers which model it sent where."""

    def __init__(
        self,
        facts: FactsTable,
        telemetry: TelemetryBook,
        speeds: SpeedBook,
        occupancy: Occupancy,
        *,
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
    ) -> None:
        self.facts = facts
        self.telemetry = telemetry
        self.speeds = speeds
        self.occupancy = occupancy
        self.clock = clock
        self.wall = wall
        self.last: dict[str, Scored] = {}  # by worker name
        # (label, model) -> when last sent (monotonic); bounded: a raw `provider/model` is the caller's choice
        self._sent: OrderedDict[tuple[str, str], float] = OrderedDict()

    def order(
        self, candidate: Candidate, routes: tuple[Route, ...], settings: RoutingSettings
    ) -> tuple[Route, ...]:
        """``routes`` best first (stable: ties keep plan order)."""
        if len(routes) < 2 or candidate.kind != "ollama":
            return routes
        scores = [self.score(route, candidate, settings) for route in routes]
        ranked = sorted(range(len(routes)), key=lambda i: -scores[i])
        return tuple(routes[i] for i in ranked)

    def sent(self, candidate: Candidate, route: Route) -> None:
        """The router chose ``route`` for ``candidate``: the model is loaded (or loading) there now."""
        if route.worker is not None:
            key = (route.endpoint.label, candidate.facts_key)
            self._sent.pop(key, None)
            self._sent[key] = self.clock()
            if len(self._sent) > MAX_SENT:
                self._sent.popitem(last=False)

    def score(self, route: Route, candidate: Candidate, settings: RoutingSettings) -> float:
        worker = route.worker
        if worker is None:
            return 0.0
        w = settings.weights
        label, model = route.endpoint.label, candidate.facts_key
        facts = self.facts.worker(label)
        loaded = False
        if facts.loaded is not None and facts.loaded_at is not None:  # /api/ps known: else no guess
            loaded = model in facts.loaded
            if not loaded:
                sent = self._sent.get((label, model))
                loaded = sent is not None and sent > facts.loaded_at
        installed = facts.installed is not None and model in facts.installed
        free, waiting, running = self.occupancy(worker, candidate.model, route.slot_limit or 1)
        ahead = waiting + (1 if free == 0 else 0)  # this request would wait too
        if not loaded:
            ahead += running  # a load may have to wait for the running requests to make room
        speed = self.speeds.get(label, model) or 0.0
        vram_fraction = util_fraction = 0.0
        avoid = 0.0
        state = self.telemetry.workers.get(worker)
        if state is not None:
            used, total = state.vram()
            if used is not None and total:
                vram_fraction = used / total
                if not loaded and vram_fraction * 100 >= settings.avoid_vram_percent:
                    avoid = w.avoid_load
            gpu = state.gpu
            if gpu is not None and gpu.utilization_percent is not None:
                util_fraction = gpu.utilization_percent / 100
        parts = (
            w.loaded if loaded else 0.0,
            w.installed if installed else 0.0,
            w.free_slots * free,
            -w.queue * ahead,
            w.speed * speed,
            -w.vram * vram_fraction,
            -w.gpu_util * util_fraction,
            -avoid,
        )
        total_score = sum(parts)
        self.last[worker] = Scored(model, total_score, parts, self.wall())
        return total_score

    def report(self) -> Mapping[str, dict[str, Any]]:
        return {worker: scored.report() for worker, scored in sorted(self.last.items())}
