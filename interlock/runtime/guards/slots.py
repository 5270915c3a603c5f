"""Choose the worker and hold a slot there: the best-scored worker with a free slot, else spill or queue.

Workers are tried in the order ``runtime.scoring`` gives (loaded model, free slots, learned speed, VRAM,
...). When none has a free slot: a candidate that may spill (``on_saturation: fallback`` and a next
candidate in the chain) is skipped at once with reason ``saturated``; otherwise the request waits in the
best-scored worker's queue. A full queue, or a wait past ``max_wait``, ends the request with 429 +
``Retry-After`` (a busy worker under ``queue`` is back-pressure, not a failure). Candidates of
OpenAI-compatible providers have no slot limit and pass at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from interlock.runtime.guards import Admission, Guard
from interlock.runtime.plan import RoutingSettings
from interlock.runtime.scoring import Scorer
from interlock.runtime.slots import SlotTable


class SlotGuard(Guard):
    def __init__(self, slots: SlotTable, scorer: Scorer, settings: Callable[[], RoutingSettings]) -> None:
        self.slots = slots
        self.scorer = scorer
        self.settings = settings

    async def admit(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        candidate = admission.candidate
        routes = self.scorer.order(candidate, admission.routes, self.settings())
        model = candidate.model
        pools = self.slots.pools
        for route in routes:
            if route.worker is None or route.slot_limit is None:
                admission.route = route
                return None
            lease = pools[route.worker].try_acquire(model, route.slot_limit)
            if lease is not None:
                admission.route, admission.lease = route, lease
                self.scorer.sent(candidate, route)
                return None
        if admission.spill:
            return "saturated"
        route = routes[0]
        assert route.worker is not None
        assert route.slot_limit is not None
        admission.route = route
        started = time.perf_counter()
        try:
            admission.lease = await pools[route.worker].acquire(model, route.slot_limit)
        finally:
            admission.queued_s = time.perf_counter() - started
        self.scorer.sent(candidate, route)
        return None
