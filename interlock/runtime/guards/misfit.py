"""What the capability and context guards share: a request's needs against each route, and one verdict.

Observe mode only counts and notes what does not fit (each guard words that itself); enforce mode keeps
the routes that fit, or, when none does, skips the candidate with a ``Misfit`` that the request's
``Preflight`` turns into the answer's error.
"""

from __future__ import annotations

from interlock.runtime.books.facts import FactsTable
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.guards import Admission, InstantGuard
from interlock.runtime.guards.preflight import Misfit, Preflight
from interlock.runtime.loaded.tables import Check, Route


class MisfitGuard(InstantGuard):
    """A guard that compares a request's needs with what is known of each route of the candidate."""

    check = Check.PREFLIGHT  # off: both would return at once

    def __init__(self, facts: FactsTable, metrics: Metrics) -> None:
        self.facts = facts
        self.metrics = metrics

    def enforce(
        self,
        admission: Admission,
        preflight: Preflight,
        keep: list[Route],
        misfit: Misfit,
    ) -> str | None:
        """Use only the routes in ``keep``; with none left, skip the candidate and record ``misfit``."""
        if keep:  # some workers do not fit (live facts differ per worker): use the others
            admission.routes = tuple(keep)
            return None
        self.metrics.preflight.labels(admission.candidate.metric_label, misfit.reason, "skipped").inc()
        preflight.misfits.append(misfit)
        return misfit.reason
