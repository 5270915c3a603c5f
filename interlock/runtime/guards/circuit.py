"""Skip a candidate whose circuit is open or none of whose endpoints is healthy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlock.runtime.books.health import HealthBook
from interlock.runtime.guards import Admission, InstantGuard, Kit


class HealthGuard(InstantGuard):
    def __init__(self, health: HealthBook) -> None:
        self.health = health

    def verdict(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        candidate = admission.candidate
        usable = self.health.usable(candidate.id, admission.routes, in_plan=candidate.in_plan)
        if isinstance(usable, str):
            return usable
        admission.routes = usable
        return None


def guard(kit: Kit) -> HealthGuard:
    return HealthGuard(kit.health)
