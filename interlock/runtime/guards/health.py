"""Skip a candidate whose circuit is open or none of whose endpoints is healthy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlock.runtime.guards import Admission, InstantGuard
from interlock.runtime.health import HealthBook


class HealthGuard(InstantGuard):
    def __init__(self, health: HealthBook) -> None:
        self.health = health

    def verdict(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        candidate = admission.candidate
        blocked = self.health.candidate_block(candidate.id, in_plan=candidate.in_plan)
        if blocked is not None:
            return blocked
        usable = self.health.endpoint_usable
        routes = admission.routes
        for route in routes:
            if not usable(route.endpoint.label):
                break
        else:
            return None
        routes = tuple(r for r in routes if usable(r.endpoint.label))
        if not routes:
            return "unhealthy"
        admission.routes = routes
        return None
