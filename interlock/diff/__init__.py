"""Semantic diff of two routing plans: typed ``Change`` records, computed one section at a time.

A section function takes the base and the head plan and returns the changes of its part of the plan;
``diff_plans`` runs them all (``SECTIONS``) and orders the result most severe first. Rendering lives in
``render``; reading plans, configs and configs at a git ref lives in ``inputs``.
"""

from __future__ import annotations

from collections.abc import Callable

from interlock.diff.access import access
from interlock.diff.alerts import alerts
from interlock.diff.aliases import aliases
from interlock.diff.change import KINDS, Change, Classification, Section
from interlock.diff.credentials import credentials
from interlock.diff.models import models
from interlock.diff.placement import placement
from interlock.diff.preflight import preflight
from interlock.diff.providers import providers
from interlock.diff.routing import routing
from interlock.diff.settings import health, server
from interlock.diff.workers import workers
from interlock.schema.plan import RoutingPlan

__all__ = ["KINDS", "SECTIONS", "Change", "Classification", "Section", "diff_plans"]

SectionDiff = Callable[[RoutingPlan, RoutingPlan], list[Change]]

SECTIONS: tuple[SectionDiff, ...] = (
    credentials,
    aliases,
    server,
    providers,
    workers,
    health,
    preflight,
    routing,
    placement,
    models,
    access,
    alerts,
)


def diff_plans(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """Every semantic change from ``base`` to ``head``, breaking first, then by section and subject."""
    changes = [change for section in SECTIONS for change in section(base, head)]
    return sorted(changes, key=Change.sort_key)
