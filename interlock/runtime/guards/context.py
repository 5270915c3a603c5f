"""Skip a candidate (or narrow to its workers) whose effective context is too small for the estimate.

The effective context per route comes from ``fit.effective_context`` (loaded > Modelfile > worker
default > plan default, capped). A caller's own ``options.num_ctx`` above a route's limit (worker
limit, gateway cap, model maximum) makes that route unusable too. Unknown context passes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from interlock.runtime.fleet.fit import effective_context, limit_on
from interlock.runtime.guards import Admission
from interlock.runtime.guards.misfit import MisfitGuard
from interlock.runtime.guards.preflight import Misfit

log = logging.getLogger("interlock.preflight")


class ContextGuard(MisfitGuard):
    async def admit(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        preflight = admission.preflight
        if preflight is None or preflight.mode == "off":
            return None
        needs = preflight.needs
        candidate = admission.candidate
        keep = []
        largest: int | None = None
        details: list[str] = []
        reason = "context_too_small"
        for route in admission.routes:
            if needs.num_ctx is not None and route.live_facts:
                limit = limit_on(route, candidate, self.facts)
                if limit is not None and needs.num_ctx > limit:
                    reason = "num_ctx_above_limit"
                    details.append(
                        f"options.num_ctx {needs.num_ctx} > limit {limit} on {route.endpoint.label}"
                    )
                    continue
            window, source = effective_context(route, candidate, self.facts, needs.num_ctx)
            if window is None and route.live_facts:  # Ollama's own default applies: say so
                preflight.note(f"context of {candidate.id} on {route.endpoint.label} unknown")
            if window is None or window >= needs.tokens:
                keep.append(route)
                continue
            largest = window if largest is None else max(largest, window)
            details.append(f"context {window} ({source}) on {route.endpoint.label}")
        if len(keep) == len(admission.routes):
            return None
        detail = "; ".join(details)
        if not preflight.enforcing:
            self.metrics.preflight.labels(candidate.metric_label, reason, "observed").inc()
            preflight.note(f"observe: {candidate.id} too small ({detail} < {needs.tokens})")
            log.info("preflight (observe): %s: %s < %d tokens", candidate.id, detail, needs.tokens)
            return None
        misfit = Misfit(candidate.id, "context", reason, detail, largest)
        return self.enforce(admission, preflight, keep, misfit)
