"""Choose the worker and hold a slot there: the best-scored worker; when it is full, spill or queue.

Sticky sessions and prefix affinity are one rule: where the session's cache is. With ``routing.prefix``
on, a request whose prompt has blocks (``fleet.prefix``) is scored by what its prefill costs on each
worker (the blocks say where its prefix is cached, so a pin adds nothing) and its session is
(re)pinned to the worker chosen; a pin decides only for a request the blocks cannot place (no
messages, or a prompt too short: a Responses call by ``previous_response_id``, say). With it off, a
session pinned to a worker still eligible for the request goes there (``runtime.fleet.sticky``).

The worker is the first in the order ``runtime.fleet.scoring`` gives (loaded model, free slots, queue, learned
speed, VRAM, ...); a full worker already scores lower by the requests it would make this one wait for,
so a worker with a free slot wins unless the full one is worth the wait (it has the model loaded and the
other would load it). When the chosen worker has no free slot: a candidate that may spill
(``on_saturation: fallback`` and a next candidate in the chain) is skipped at once with reason
``saturated``; under ``queue`` with ``fallback_after``, one is skipped with reason ``expected_wait`` when
(requests queued there + 1) x the learned service time / the model's slots exceeds it (not yet learned:
it queues); otherwise the request waits: in the candidate's fleet line (``runtime.fleet``: unbound,
dispatched to whichever worker can start it soonest, re-chosen whenever a slot frees) when the
candidate has several workers, the session is not pinned and the slots are this process's; else in that
worker's queue (bound on arrival). A request under ``queue`` does not overtake the fleet line: while
the line has waiters, a newcomer joins it. Queue and line hand a freed slot over in fair order
(``runtime.state.fair``: interactive before batch, then each tenant's weighted share; the request's
``Turn`` is its caller's, set on the ``Preflight``). A full queue or line, or a wait past
``max_wait``, ends the request with 429 + ``Retry-After`` (a busy worker under ``queue`` is
back-pressure, not a failure). OpenAI-compatible providers listed with ``workers`` (llama.cpp, vLLM,
... servers) get the same slots, queues and choice; those with a ``base_url`` have no slot limit and
pass at once. Where the slots live (this process, the host's supervisor, Redis) is the ``SlotBackend``'s
business. A worker's own ``on_saturation`` wins over the alias's for requests sent to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from interlock.common.patterns import untagged
from interlock.runtime.base.errors import SlotUnavailable
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.fleet.line import FleetLine
from interlock.runtime.fleet.prefix import Prefix, prompt_prefix
from interlock.runtime.fleet.scoring import Scorer
from interlock.runtime.fleet.sticky import StickyTable, session_key
from interlock.runtime.guards import Admission, Guard, Kit
from interlock.runtime.loaded.callers import COMMON, Turn
from interlock.runtime.loaded.tables import Candidate, Check, Route, RoutingSettings
from interlock.runtime.state.base import SlotBackend


class SlotGuard(Guard):
    check = Check.WORKERS  # a base_url's one route has no worker and no slot limit: taken as it is

    def __init__(
        self,
        slots: SlotBackend,
        scorer: Scorer,
        settings: Callable[[], RoutingSettings],
        sticky: StickyTable | None = None,
        fleet: FleetLine | None = None,
        metrics: Metrics | None = None,
        busy: Callable[[], None] | None = None,
    ) -> None:
        self.metrics = metrics  # who waits, by tenant and class (None: not counted)
        self.busy = busy  # told when a request finds its worker full (the probe loop: a down one may be up)
        self.slots = slots
        self.scorer = scorer
        self.settings = settings
        self.sticky = sticky if sticky is not None else StickyTable()
        self.fleet = fleet  # None: every request is bound to one worker's queue on arrival

    async def admit(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        candidate = admission.candidate
        settings = self.settings()
        sticky, key = settings.sticky, None
        route = pinned_route = None
        several = len(candidate.routes) > 1
        prefix = prompt_prefix(body) if several and settings.prefix is not None else None
        if sticky is not None and several and admission.preflight is not None:
            key = session_key(candidate.id, admission.preflight.session, body, sticky.prefix_bytes)
            pinned = self.sticky.worker(key, sticky) if key is not None and prefix is None else None
            route = next((r for r in admission.routes if r.worker == pinned), None) if pinned else None
            pinned_route = route
        if route is None:
            route = self.scorer.order(candidate, admission.routes, settings, prefix=prefix)[0]
        if key is not None and sticky is not None and route.worker is not None:
            self.sticky.pin(key, route.worker, sticky)
        if route.worker is None or route.slot_limit is None:
            admission.route = route
            return None
        fleet = self.fleet
        if fleet is not None and (len(admission.routes) < 2 or pinned_route is not None or not fleet.usable):
            fleet = None  # nothing to re-choose, or a worker of its own: bound on arrival
        spill = admission.spill
        own = settings.worker_saturation.get(route.worker)
        if own == "queue":
            spill = None
        elif own == "fallback":
            spill = 0.0 if admission.has_next else None
        model, slots = untagged(candidate.model), self.slots  # `m` and `m:latest`: one model, one count
        turn = admission.preflight.turn if admission.preflight is not None else COMMON
        lease = None
        if fleet is None or spill == 0 or not fleet.waiting(candidate.id):  # never overtake the line
            lease = await slots.acquire(route.worker, model, route.slot_limit, wait=False, turn=turn)
        if lease is None:
            if self.busy is not None:
                self.busy()
            if spill == 0:
                return "saturated"
            if spill is not None and self._expected_wait(candidate, route, fleet) > spill:
                return "expected_wait"
            admission.route = route
            started = time.perf_counter()
            counted = self._waits(turn, +1)
            try:
                if fleet is not None:
                    await self._line_up(admission, fleet, key, prefix, turn)
                    return None
                self.scorer.queue(route.worker, model, +1)
                try:
                    lease = await slots.acquire(route.worker, model, route.slot_limit, wait=True, turn=turn)
                finally:
                    self.scorer.queue(route.worker, model, -1)
            except SlotUnavailable:
                if counted is not None:
                    counted.queue_turned_away.labels(*_labels(turn)).inc()
                raise
            finally:
                admission.queued_s = time.perf_counter() - started
                if counted is not None:
                    self._waits(turn, -1)
                    if lease is not None or admission.lease is not None:  # handed a slot
                        counted.queue_wait_seconds.labels(*_labels(turn)).observe(admission.queued_s)
        admission.route = route
        assert lease is not None
        admission.lease = self.fleet.wrap(lease) if self.fleet is not None else lease
        self.scorer.sent(candidate, route, prefix)
        return None

    def _waits(self, turn: Turn, step: int) -> Metrics | None:
        """Count a request starting (+1) or ending (-1) a wait; the metrics, when counted."""
        metrics = self.metrics
        if metrics is not None:
            metrics.queue_waiting.labels(*_labels(turn)).inc(step)
        return metrics

    async def _line_up(
        self, admission: Admission, fleet: FleetLine, key: bytes | None, prefix: Prefix | None, turn: Turn
    ) -> None:
        """Wait in the candidate's fleet line; the route and slot it is dispatched to (the line has
        noted the choice with the scorer and wrapped the lease); the session pinned there."""
        assert admission.route is not None
        route, lease = await fleet.wait(admission.candidate, admission.routes, admission.route, prefix, turn)
        admission.route, admission.lease = route, lease
        sticky = self.settings().sticky
        if key is not None and sticky is not None and route.worker is not None:
            self.sticky.pin(key, route.worker, sticky)

    def _expected_wait(self, candidate: Candidate, route: Route, fleet: FleetLine | None) -> float:
        """Seconds until a slot frees for this request: the requests ahead (the worker's queue, and
        the candidate's fleet line when it would join it) and itself times the learned service time,
        over the model's slots; 0 while the service time is not learned."""
        assert route.worker is not None
        service = self.scorer.speeds.service(route.endpoint.label, candidate.facts_key)
        if service is None:
            return 0.0
        _, waiting, _, _ = self.scorer.occupancy(
            route.worker, untagged(candidate.model), route.slot_limit or 1
        )
        if fleet is not None:
            waiting += fleet.waiting(candidate.id)
        return (waiting + 1) * service / (route.slot_limit or 1)


def _labels(turn: Turn) -> tuple[str, str]:
    return (turn.tenant or "-", turn.label)


def guard(kit: Kit) -> SlotGuard:
    fleet = kit.fleet
    if fleet is None:
        raise ValueError("the slot guard is the fleet's: built only once a plan has workers")
    line = fleet.line
    return SlotGuard(kit.slots, fleet.scorer, line.settings, fleet.sticky, line, kit.metrics, busy=fleet.busy)
