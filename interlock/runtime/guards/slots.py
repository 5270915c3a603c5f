"""Choose the worker and hold a slot there: a free slot at once, else wait in the least busy queue.

A full queue, or a wait past ``max_wait``, ends the request with 429 + ``Retry-After`` (it does not move
on to the next candidate: a busy worker is back-pressure, not a failure, and chain order is the
operator's preference). Candidates of OpenAI-compatible providers have no slot limit and pass at once.
Where the slots live (this process, the host's supervisor) is the ``SlotBackend``'s business.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from interlock.runtime.guards import Admission, Guard
from interlock.runtime.state import SlotBackend


class SlotGuard(Guard):
    def __init__(self, slots: SlotBackend) -> None:
        self.slots = slots

    async def admit(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        routes = admission.routes
        model = admission.candidate.model
        slots = self.slots
        for route in routes:
            if route.worker is None or route.slot_limit is None:
                admission.route = route
                return None
            lease = await slots.acquire(route.worker, model, route.slot_limit, wait=False)
            if lease is not None:
                admission.route, admission.lease = route, lease
                return None
        route = min(routes, key=lambda r: slots.waiting(r.worker) if r.worker else 0)
        assert route.worker is not None
        assert route.slot_limit is not None
        admission.route = route
        started = time.perf_counter()
        try:
            admission.lease = await slots.acquire(route.worker, model, route.slot_limit, wait=True)
        finally:
            admission.queued_s = time.perf_counter() - started
        return None
