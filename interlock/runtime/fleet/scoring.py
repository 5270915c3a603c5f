"""Worker scoring: order the routes (workers) of one candidate by what is known about them right now.

Every input is gathered outside the request path and read here with dictionary lookups:

- ``loaded``: the model is in the worker's ``/api/ps`` (``LiveFacts``), or this gateway sent it there
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

The order is by expected seconds until the worker starts on the request (``expected_s``), the points
breaking ties (several workers with the model loaded and a slot free: speed, VRAM, utilisation decide):

- loaded, a slot free: 0 (plus what is left of a load this gateway started there, by the learned load
  time less the time since it was sent);
- loaded, no slot free: (requests queued there + 1) x the learned service time / the model's slots
  (queued for this model when its own slots are full, else all queued on the worker);
- not loaded: the learned load time, plus one service time when requests are running there (Ollama
  evicts only idle models, so the load may wait for room), plus the queue as above when no slot is free;
  workers are then ordered with the eviction cost added (``evicts_s``: the learned load time of each
  idle model the load would evict, least recently sent first, that no other worker holds).

Learned times (``SpeedBook``): the service time of (worker, model), else of the model on another of the
candidate's workers, else ``DEFAULT_SERVICE_S``; the load time of (worker, model), else of any model on
that worker, else on any worker, else ``DEFAULT_LOAD_S``. A worker above ``avoid_vram_percent`` that
would load, or whose ``/api/tags`` lacks the model, sorts after every other whatever its time.
A burst on one model therefore queues where the model is loaded until the wait there passes a load
elsewhere; then a second worker loads it (a replica), and the burst is shared.

Prefix affinity (``runtime.fleet.prefix``): a request whose prompt starts as one sent to a worker
before (a shared system prompt, tool schemas, earlier turns) gets the prefill seconds that cached
prefix would save subtracted from that worker's expected seconds (``prefix_s``), when the model is
still loaded there (or its ``/api/ps`` is unknown): a warm worker wins unless its queue costs more
than the prefill it saves. A sticky session's pin still comes first (``guards.slots``).

A candidate with one route, or of an OpenAI-compatible provider with a ``base_url``, is not scored
(nothing to choose). The workers of an OpenAI-compatible provider (llama.cpp, vLLM, SGLang servers) are
rated by ``fleet.signals.choice`` instead: no loads, their own load signals and this gateway's slots.
Ties keep the plan's worker order. The last score of each worker and its parts are kept for
``/v1/health`` (one small tuple per route scored).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from interlock.common.patterns import ollama_name, untagged
from interlock.runtime.base.clock import Clock, iso_utc
from interlock.runtime.fleet.live_facts import LiveFacts
from interlock.runtime.fleet.prefix import CHARS_PER_TOKEN, Prefix, PrefixIndex
from interlock.runtime.fleet.signals.choice import rate_server
from interlock.runtime.fleet.speeds import SpeedBook
from interlock.runtime.loaded.tables import Candidate, Route, RoutingSettings, WorkerLimits
from interlock.runtime.state.base import SlotBackend
from interlock.runtime.telemetry.collector import TelemetryBook, WorkerTelemetry

Occupancy = Callable[[str, str, int], tuple[int, int, int, Mapping[str, int]]]
"""``(worker, model, slot limit) -> (free slots for that model there, requests waiting there, requests
running there, requests running there per model)``."""

MAX_SENT = 4096
PARTS = ("loaded", "installed", "free_slots", "queue", "speed", "vram", "gpu_util", "avoid_load")
DEFAULT_SERVICE_S = 2.0  # one request's time on a worker before any is learned
DEFAULT_LOAD_S = 3.0  # one model load before any is learned (an 8B model from NVMe on an RTX 4090)


def backend_occupancy(slots: SlotBackend, workers: Callable[[], Mapping[str, WorkerLimits]]) -> Occupancy:
    """The slot backend as an ``Occupancy``: the one place scoring reads slot state. It reads this
    process's share (``SlotBackend.local``, no I/O): with a shared store, other processes' requests
    are not counted here, and the backend still enforces the whole limit."""

    def occupancy(worker: str, model: str, limit: int) -> tuple[int, int, int, Mapping[str, int]]:
        share = slots.local(worker)
        limits = workers().get(worker)
        most = limits.max_concurrent if limits is not None else limit
        free = min(limit - share.per_model.get(model, 0), most - share.in_use)
        return max(free, 0), share.waiting, share.in_use, share.per_model

    return occupancy


@dataclass(slots=True)
class Scored:
    """One worker's last score for one model, with its parts (in ``PARTS`` order) and when (wall).
    Written once per choice and never changed after (not frozen: a frozen dataclass's ``__init__``
    costs a microsecond more, and one is made per worker per request)."""

    model: str
    score: float
    parts: tuple[float, ...]
    at: float
    expected_s: float = 0.0  # seconds until the worker would start on the request
    last_resort: bool = False  # would load above avoid_vram_percent, or lacks the model
    load_s: float = 0.0  # the load this choice would start (0: none)
    room_s: float = 0.0  # how long that load would wait for room (busy models, loads sent before)
    evicts_s: float = 0.0  # loads of models it would evict that no other worker holds (their next load)
    prefix_s: float = 0.0  # prefill seconds the prompt's cached prefix there would save
    miss_s: float = 0.0  # prefill seconds of the prompt's part not cached there (OpenAI-compatible servers)
    victim_s: float = 0.0  # prefill seconds the held prompt it would evict there cost its session
    capacity: int | None = None  # prompts the worker's cache holds (its slots + spare), where modelled

    def report(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "expected_s": round(self.expected_s, 3),
            "evicts_s": round(self.evicts_s, 3),
            "prefix_s": round(self.prefix_s, 3),
            "miss_s": round(self.miss_s, 3),
            "victim_s": round(self.victim_s, 3),
            "cache_prompts": self.capacity,
            "last_resort": self.last_resort,
            "score": round(self.score, 2),
            "parts": {name: round(value, 2) for name, value in zip(PARTS, self.parts, strict=True)},
            "at": iso_utc(self.at),
        }


NO_GPU_LOAD: tuple[float, float, float, int | None] = (0.0, 0.0, 0.0, None)  # a worker without telemetry


def _gpu_load(
    state: WorkerTelemetry, loaded: bool, settings: RoutingSettings
) -> tuple[float, float, float, int | None]:
    """A worker's telemetry as scoring reads it: (VRAM in use as a fraction, GPU utilisation as a
    fraction, the ``avoid_load`` penalty when it would load the model at or above ``avoid_vram_percent``,
    total VRAM)."""
    vram_fraction = util_fraction = avoid = 0.0
    used, total = state.vram()
    if used is not None and total:
        vram_fraction = used / total
        if not loaded and vram_fraction * 100 >= settings.avoid_vram_percent:
            avoid = settings.weights.avoid_load
    gpu = state.gpu
    if gpu is not None and gpu.utilization_percent is not None:
        util_fraction = gpu.utilization_percent / 100
    return vram_fraction, util_fraction, avoid, total


class Scorer:
    """Orders a candidate's routes, best first; remembers which model it sent where."""

    def __init__(
        self,
        facts: LiveFacts,
        telemetry: TelemetryBook,
        speeds: SpeedBook,
        occupancy: Occupancy,
        *,
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
        prefixes: PrefixIndex | None = None,
    ) -> None:
        self.facts = facts
        self.prefixes = prefixes if prefixes is not None else PrefixIndex()
        self.telemetry = telemetry
        self.speeds = speeds
        self.occupancy = occupancy
        self.clock = clock
        self.wall = wall
        self.last: dict[str, Scored] = {}  # by worker name
        # (label, model) -> when last sent (monotonic); bounded: a raw `provider/model` is the caller's choice
        self._sent: OrderedDict[tuple[str, str], float] = OrderedDict()
        # (label, model) -> when a load sent there should be done; label -> when the last load sent
        # there should have its room (Ollama serves in arrival order: what comes after a load waits)
        # label -> model -> (when sent, when done); only loads sent since that worker's last /api/ps
        self._loading: dict[str, dict[str, tuple[float, float]]] = {}
        self._room_at: dict[str, float] = {}
        self._queued: dict[tuple[str, str], int] = {}  # (worker, model) -> requests waiting for a slot

    def order(
        self,
        candidate: Candidate,
        routes: tuple[Route, ...],
        settings: RoutingSettings,
        *,
        ahead: int | None = None,
        prefix: Prefix | None = None,
    ) -> tuple[Route, ...]:
        """``routes`` best first (stable: ties keep plan order). ``ahead``: a fleet line's waiter, with
        that many waiters before it; they count as queued on every full worker, instead of the
        worker's own queue. ``prefix``: the request's prompt blocks (``prefix.prompt_prefix``)."""
        if len(routes) < 2 or routes[0].worker is None:
            return routes
        service = self._fleet_service(candidate, routes)
        scored = [self.rate(route, candidate, settings, service, ahead, prefix) for route in routes]
        ranked = sorted(range(len(routes)), key=lambda i: scored[i])
        return tuple(routes[i] for i in ranked)

    def _fleet_service(self, candidate: Candidate, routes: tuple[Route, ...]) -> float:
        """The model's learned service time on any of the routes (the first learned), else the default."""
        for route in routes:
            service = self.speeds.service(route.endpoint.label, candidate.facts_key)
            if service is not None:
                return service
        return DEFAULT_SERVICE_S

    def sent(self, candidate: Candidate, route: Route, prefix: Prefix | None = None) -> None:
        """The router chose ``route`` for ``candidate``: the model is loaded (or loading) there now,
        and the prompt's ``prefix`` is in its cache."""
        if route.worker is not None:
            now = self.clock()
            key = (route.endpoint.label, candidate.facts_key)
            scored = self.last.get(route.worker)
            if prefix is not None:
                same = scored is not None and scored.model == key[1]
                hit = same and scored is not None and scored.prefix_s > 0
                capacity = scored.capacity if same and scored is not None else None
                self.prefixes.served(key[0], key[1], prefix, hit=hit, capacity=capacity, now=now)
            self._sent.pop(key, None)
            self._sent[key] = now
            if len(self._sent) > MAX_SENT:
                self._sent.popitem(last=False)
            if scored is not None and scored.model == key[1] and scored.load_s > 0:  # a load starts
                label, read_at = key[0], self.facts.worker(key[0]).loaded_at or 0.0
                loading = {m: t for m, t in self._loading.get(label, {}).items() if t[0] > read_at}
                loading[key[1]] = (now, now + scored.room_s + scored.load_s)
                self._loading[label] = loading
                self._room_at[label] = max(self._room_at.get(label, 0.0), now + scored.room_s)

    def queue(self, worker: str, model: str, step: int) -> None:
        """A request starts (+1) or stops (-1) waiting for a slot of ``model`` on ``worker``."""
        key = (worker, model)
        left = self._queued.get(key, 0) + step
        if left > 0:
            self._queued[key] = left
        else:
            self._queued.pop(key, None)

    def _resident(self, label: str, listed: Mapping[str, int | None]) -> list[str]:
        """The models loaded (``/api/ps``) or loading (sent since) on the worker."""
        read_at = self.facts.worker(label).loaded_at or 0.0
        sent = self._loading.get(label, {})
        return [*listed, *(m for m, (at, _) in sent.items() if at > read_at and m not in listed)]

    def _room_wait(
        self,
        label: str,
        model: str,
        resident: Mapping[str, int | None] | None,
        busy: Mapping[str, int],
        total_vram: int | None,
        fleet_service: float,
    ) -> tuple[float, float]:
        """How a load of ``model`` on the worker would make room: (seconds it would wait for room, the
        cost of what it would evict).

        The wait is 0 when the model fits beside what is loaded (``/api/ps`` and loads sent since) or
        idle models can be evicted; else the longest learned service time of the busy models (Ollama
        evicts only idle ones). The eviction cost: the box evicts its idle models least recently used
        first (here: least recently sent by this gateway, never sent first); each one evicted that no
        other worker holds costs its learned load time (its next request must load it again). Unknown
        sizes: (0, 0)."""
        size = self.facts.size(model)
        if size is None or not total_vram or resident is None:
            return 0.0, 0.0
        need = size - total_vram
        idle: list[tuple[float, str, int]] = []
        waits = [0.0]
        in_use = {ollama_name(name) for name, n in busy.items() if n > 0}
        for other in self._resident(label, resident):
            other_size = self.facts.size(other) or 0
            need += other_size
            if other in in_use:
                waits.append(self.speeds.service(label, other) or fleet_service)
            else:
                idle.append((self._sent.get((label, other), 0.0), other, other_size))
        if need <= 0:
            return 0.0, 0.0
        if need > sum(entry[2] for entry in idle):
            return max(waits), 0.0
        cost = 0.0
        for _, victim, victim_size in sorted(idle):
            if need <= 0:
                break
            need -= victim_size
            if not self._held_elsewhere(label, victim):
                cost += self.speeds.load_time(label, victim) or DEFAULT_LOAD_S
        return 0.0, cost

    def _held_elsewhere(self, label: str, model: str) -> bool:
        """Whether a worker other than ``label`` has ``model`` loaded (its last ``/api/ps``) or loading
        (sent there since)."""
        if any(other != label for other in self.facts.holders(model)):
            return True
        facts = self.facts
        return any(
            other != label and model in loads and loads[model][0] > (facts.worker(other).loaded_at or 0.0)
            for other, loads in self._loading.items()
        )

    def score(self, route: Route, candidate: Candidate, settings: RoutingSettings) -> float:
        """The points of ``route`` (kept with its parts and expected time in ``last``)."""
        return -self.rate(route, candidate, settings, DEFAULT_SERVICE_S)[2]

    def rate(
        self,
        route: Route,
        candidate: Candidate,
        settings: RoutingSettings,
        fleet_service: float,
        line_ahead: int | None = None,
        prefix: Prefix | None = None,
    ) -> tuple[bool, float, float]:
        """The sort key of ``route``: (last resort, expected seconds, −points)."""
        worker = route.worker
        if worker is None:
            return (False, 0.0, 0.0)
        if not route.live_facts:  # an OpenAI-compatible server: see fleet.signals.choice
            return self._rate_server(route, worker, candidate, settings, fleet_service, line_ahead, prefix)
        w = settings.weights
        label, model, bare = route.endpoint.label, candidate.facts_key, untagged(candidate.model)
        facts = self.facts.worker(label)
        loaded = False
        loading_since: float | None = None  # sent since the last /api/ps: loaded, or still loading
        if facts.loaded is not None and facts.loaded_at is not None:  # /api/ps known: else no guess
            loaded = model in facts.loaded
            if not loaded:
                sent = self._sent.get((label, model))
                loaded = sent is not None and sent > facts.loaded_at
                loading_since = sent if loaded else None
        installed = facts.installed is not None and model in facts.installed
        free, waiting, running, busy = self.occupancy(worker, bare, route.slot_limit or 1)
        ahead = waiting + (1 if free == 0 else 0)  # this request would wait too
        if not loaded:
            ahead += running  # a load may have to wait for the running requests to make room
        speed = self.speeds.get(label, model) or 0.0
        state = self.telemetry.workers.get(worker)
        vram_fraction, util_fraction, avoid, total_vram = (
            _gpu_load(state, loaded, settings) if state is not None else NO_GPU_LOAD
        )
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
        now = self.clock()
        service = self.speeds.service(label, model) or fleet_service
        slots = route.slot_limit or 1
        expected = 0.0 if free else self._queue_s(worker, bare, busy, waiting, line_ahead, service, slots)
        ahead_s = max(self._room_at.get(label, 0.0) - now, 0.0)  # a load sent there waits for room
        load_s = room_s = evicts_s = 0.0
        if loading_since is not None:
            done = self._loading.get(label, {}).get(model)
            expected += max(done[1] - now, 0.0) if done is not None else 0.0
        elif not loaded:
            load_s = self.speeds.load_time(label, model) or DEFAULT_LOAD_S
            room_s, evicts_s = self._room_wait(label, model, facts.loaded, busy, total_vram, fleet_service)
            expected += max(room_s, ahead_s) + load_s
        else:
            expected = max(expected, ahead_s)
        last_resort = avoid > 0 or (facts.installed is not None and not installed)
        prefix_s = 0.0
        if prefix is not None and settings.prefix is not None and (loaded or facts.loaded is None):
            # unloaded: its cache is gone
            prefix_s = self.prefixes.saved_s(label, model, prefix)
        self.last[worker] = Scored(
            model,
            total_score,
            parts,
            self.wall(),
            expected,
            last_resort,
            load_s,
            max(room_s, ahead_s),
            evicts_s,
            prefix_s,
        )
        return (last_resort, expected + evicts_s - prefix_s, -total_score)

    def _queue_s(
        self,
        worker: str,
        model: str,
        busy: Mapping[str, int],
        waiting: int,
        line_ahead: int | None,
        service: float,
        slots: int,
    ) -> float:
        """Seconds a request waits for a slot that is not free: behind the model's own queue when its
        slots are full, else the worker's; a fleet line's waiter behind those ahead of it in the line."""
        model_full = busy.get(model, 0) >= slots
        ahead_n = self._queued.get((worker, model), 0) if model_full else waiting
        if line_ahead is not None:
            ahead_n = line_ahead
        return (ahead_n + 1) * service / slots

    def _rate_server(
        self,
        route: Route,
        worker: str,
        candidate: Candidate,
        settings: RoutingSettings,
        fleet_service: float,
        line_ahead: int | None,
        prefix: Prefix | None = None,
    ) -> tuple[bool, float, float]:
        """The sort key of an OpenAI-compatible worker's route (``rate_server``), kept in ``last``; with
        a prompt and prefix affinity on, the wait plus what the prompt's prefill there costs
        (``affinity``)."""
        label, model = route.endpoint.label, candidate.facts_key
        slot_limit = route.slot_limit or 1
        free, waiting, running, _ = self.occupancy(worker, untagged(candidate.model), slot_limit)
        util = 0.0
        state = self.telemetry.workers.get(worker)
        gpu = state.gpu if state is not None else None
        if gpu is not None and gpu.utilization_percent is not None:
            util = gpu.utilization_percent / 100
        load = self.facts.load(label)
        expected, parts = rate_server(
            load,
            (free, waiting, running),
            slot_limit,
            self.speeds.service(label, model) or fleet_service,
            line_ahead,
            settings.weights,
            self.speeds.get(label, model) or 0.0,
            util,
        )
        points = sum(parts)
        affinity = settings.prefix
        if prefix is None or affinity is None:
            self.last[worker] = Scored(model, points, parts, self.wall(), expected)
            return (False, expected, -points)
        capacity = (load.slots if load is not None and load.slots else slot_limit) + affinity.spare_prompts
        chars, victim = self.prefixes.look(label, model, prefix, capacity, self.clock(), affinity.idle_s)
        per_char = 1.0 / (CHARS_PER_TOKEN * self.prefixes.prefill.tokens_per_s(label, model))
        hit_s, miss_s, victim_s = chars * per_char, (prefix.ends[-1] - chars) * per_char, victim * per_char
        at = self.wall()
        self.last[worker] = Scored(
            model, points, parts, at, expected, False, 0.0, 0.0, 0.0, hit_s, miss_s, victim_s, capacity
        )
        return (False, expected + affinity.miss * miss_s + affinity.evict * victim_s, -points)

    def report(self) -> Mapping[str, dict[str, Any]]:
        return {worker: scored.report() for worker, scored in sorted(self.last.items())}
