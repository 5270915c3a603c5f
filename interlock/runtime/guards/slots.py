"""Choose the worker and hold a slot there: the best-scored worker; when it is full, spill or queue.

With sticky sessions on, a session pinned to a worker still eligible for the request goes there
(``runtime.sticky``); otherwise it is scored as usual and (re)pinned to the worker chosen.

The worker is the first in the order ``runtime.scoring`` gives (loaded model, free slots, queue, learned
speed, VRAM, ...); a full worker already scores lower by the requests it would make this one wait for,
so a worker with a free slot wins unless the full one is worth the wait (it has the model loaded and the
other would load it). When the chosen worker has no free slot: a candidate that may spill
(``on_saturation: fallback`` and a next candidate in the chain) is skipped at once with reason
``saturated``; under ``queue`` with ``fallback_after``, one is skipped with reason ``expected_wait`` when
(requests queued there + 1) x the learned service time / the model's slots exceeds it (not yet learned:
it queues); otherwise the request waits in that worker's queue. A full queue, or a wait past
``max_wait``, ends the request with 429 + ``Retry-After`` (a busy worker under ``queue`` is
back-pressure, not a failure). Candidates of OpenAI-compatible providers have no slot limit and pass
at once. Where the slots live (this process, the host's supervisor, Redis) is the ``SlotBackend``'s
business. A worker's own ``on_saturation`` wins over the alias's for requests sent to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from interlock.runtime.guards import Admission, Guard
from interlock.runtime.plan import Candidate, Route, RoutingSettings
from interlock.runtime.scoring import Scorer
from interlock.runtime.state import SlotBackend
from interlock.runtime.sticky import StickyTable, session_key


class SlotGuard(Guard):
    def __init__(
        self,
        slots: SlotBackend,
        scorer: Scorer,
        settings: Callable[[], RoutingSettings],
        sticky: StickyTable | None = None,
    ) -> None:
        self.slots = slots
        self.scorer = scorer
        self.settings = settings
        self.sticky = sticky if sticky is not None else StickyTable()

    async def admit(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        candidate = admission.candidate
        settings = self.settings()
        sticky, key = settings.sticky, None
        route = None
        if sticky is not None and len(candidate.routes) > 1 and admission.preflight is not None:
            key = session_key(candidate.id, admission.preflight.session, body, sticky.prefix_bytes)
            pinned = self.sticky.worker(key, sticky) if key is not None else None
            route = next((r for r in admission.routes if r.worker == pinned), None) if pinned else None
        if route is None:
            route = self.scorer.order(candidate, admission.routes, settings)[0]
        if key is not None and sticky is not None and route.worker is not None:
            self.sticky.pin(key, route.worker, sticky)
        if route.worker is None or route.slot_limit is None:
            admission.route = route
            return None
        model, slots = candidate.model, self.slots
        lease = await slots.acquire(route.worker, model, route.slot_limit, wait=False)
        if lease is None:
            spill = admission.spill
            own = settings.worker_saturation.get(route.worker)
            if own == "queue":
                spill = None
            elif own == "fallback":
                spill = 0.0 if admission.has_next else None
            if spill == 0:
                return "saturated"
            if spill is not None and self._expected_wait(candidate, route) > spill:
                return "expected_wait"
            admission.route = route
            started = time.perf_counter()
            self.scorer.queue(route.worker, model, +1)
            try:
                lease = await slots.acquire(route.worker, model, route.slot_limit, wait=True)
            finally:
                self.scorer.queue(route.worker, model, -1)
                admission.queued_s = time.perf_counter() - started
        admission.route, admission.lease = route, lease
        self.scorer.sent(candidate, route)
        return None

    def _expected_wait(self, candidate: Candidate, route: Route) -> float:
        """Seconds until a slot frees for this request: the requests ahead (and itself) times the
        learned service time, over the model's slots; 0 while the service time is not learned."""
        assert route.worker is not None
        service = self.scorer.speeds.service(route.endpoint.label, candidate.facts_key)
        if service is None:
            return 0.0
        _, waiting, _, _ = self.scorer.occupancy(route.worker, candidate.model, route.slot_limit or 1)
        return (waiting + 1) * service / (route.slot_limit or 1)
