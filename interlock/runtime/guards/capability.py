"""Skip a candidate (or narrow to its workers) known to lack a capability the request needs.

Known means declared in the plan or reported live by the worker's ``/api/show``; unknown passes
(availability wins) and is noted when the request needs more than plain completion. ``observe`` mode
reports what it would skip and lets everything through; ``off`` checks nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from interlock.runtime.books.estimate import COMPLETION, EMBEDDING
from interlock.runtime.books.fit import capabilities_on
from interlock.runtime.guards import Admission, Kit
from interlock.runtime.guards.misfit import MisfitGuard
from interlock.runtime.guards.preflight import Misfit

log = logging.getLogger("interlock.preflight")
PLAIN = (COMPLETION, EMBEDDING)
"""What a plain chat or embedding request needs: not knowing the capabilities is no news then."""


class CapabilityGuard(MisfitGuard):
    def verdict(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        preflight = admission.preflight
        if preflight is None or preflight.mode == "off":
            return None
        needed = preflight.needs.capabilities
        candidate = admission.candidate
        if not candidate.live_facts:  # the plan's declaration alone, on every route: one answer
            declared = candidate.capabilities
            if declared is None:
                if needed not in PLAIN:
                    preflight.note(f"capabilities of {candidate.id} unknown")
                return None
            if needed <= declared:
                return None
        routes = admission.routes
        keep = []
        lacking: set[str] = set()
        unknown = False
        for route in routes:
            caps = capabilities_on(route, candidate, self.facts)
            if caps is None:
                unknown = True
                keep.append(route)
            elif needed <= caps:
                keep.append(route)
            else:
                lacking |= needed - caps
        if unknown and needed not in PLAIN:
            preflight.note(f"capabilities of {candidate.id} unknown")
        if not lacking:
            return None
        reason = "lacks_" + sorted(lacking)[0]
        detail = f"lacks {', '.join(sorted(lacking))}"
        if not preflight.enforcing:
            self.metrics.preflight.labels(candidate.metric_label, reason, "observed").inc()
            preflight.note(f"observe: {candidate.id} {detail}")
            log.info("preflight (observe): %s %s", candidate.id, detail)
            return None
        return self.enforce(admission, preflight, keep, Misfit(candidate.id, "capability", reason, detail))


def guard(kit: Kit) -> CapabilityGuard:
    return CapabilityGuard(kit.facts, kit.metrics)
