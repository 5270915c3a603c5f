"""The feature table: what plugs into the request lifecycle's named points, settled at plan load.

The lifecycle (``runtime/request/lifecycle.py``) is the core: read, resolve, estimate, walk, answer, meter. A
feature is one module here that plugs into it at its named points, beside the guard chain (which the
router runs per candidate, ``guards.GUARDS``):

- ``authenticate``: before the body is read (the caller keys': a refusal is answered there);
- ``admit``: after the request is read and resolved, before the walk. A feature may refuse the request
  (raise), narrow its target, cut its output limit, or take a stake (``Exchange.stake``: credits
  reserved, a rate counted) that is settled however the request ends;
- ``settle``: after the walk, when an upstream answered, with the request's metered usage (``Tally``):
  plain calls, in table order, before the stakes are released (a request no upstream answered settles
  only its stakes).

``FEATURES`` is the table: one row per feature, its module's import path, and whether a plan wants it.
At plan load (and again at every reload) ``Plugged.hooks`` keeps the rows the plan wants and imports
their modules then (``importlib``, as ``interlock.common.kinds`` does for adapters): a plan without keys,
budgets or sticky sessions never imports those modules, and its requests loop over empty tuples. Each
module has one ``plug(services) -> Feature``, called once per gateway.

To add a feature: one module here with a ``plug``, and one row in ``FEATURES``.

One more row plugs in a part rather than hooks: ``FLEET``, the workers (``fleet/plug.py``: telemetry,
worker choice and its slot guard, the fleet line, placement, load signals, learned speeds). A plan wants
it when it has workers; ``app/parts.py`` imports its module and calls its ``plug`` the first time a plan
does (at start, or the reload that brings the first workers) and seats what it makes in the core's
seats (``services.Current.fleet``, ``guards.Kit.fleet``, the router's ``servers`` and ``progress``, the
probe loop's rounds, the metrics' gauges). A plan without workers never imports ``runtime/fleet``'s
worker modules nor ``runtime/telemetry``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from interlock.runtime.request.services import Admit, Authenticate, Hooks, Settle

if TYPE_CHECKING:
    from interlock.runtime.loaded.plan import RuntimePlan
    from interlock.runtime.request.services import RequestServices


@dataclass(frozen=True, slots=True)
class Feature:
    """One feature's hooks at the lifecycle's points (None: not at that point)."""

    admit: Admit | None = None
    waits: bool = False  # ``admit`` is a coroutine function (else called as it is: no coroutine made)
    settle: Settle | None = None
    authenticate: Authenticate | None = None  # before the body is read (one feature: the keys)


@dataclass(frozen=True, slots=True)
class Row:
    """One feature: ``module`` (an import path, imported only when a plan wants it) has ``plug``."""

    name: str
    module: str
    wanted: Callable[[RuntimePlan], bool]


def _keys(plan: RuntimePlan) -> bool:
    return plan.keys is not None


def _budgets(plan: RuntimePlan) -> bool:
    """Some key (or its tenant) has credits or rates: a plan with keys but no budgets runs none of it."""
    keys = plan.keys
    if keys is None:
        return False
    callers = [*keys.by_digest.values(), *(entry[2] for entry in keys.by_id.values())]
    return any(caller.credits or caller.budgets for caller in callers)


def _sticky(plan: RuntimePlan) -> bool:
    return plan.routing.sticky is not None


def _always(plan: RuntimePlan) -> bool:
    return True


FEATURES: tuple[Row, ...] = (
    Row("sticky sessions", "interlock.runtime.features.sticky", _sticky),
    Row("caller keys", "interlock.runtime.features.keys", _keys),  # before the budgets: its target
    Row("credits and budgets", "interlock.runtime.features.budgets", _budgets),
    Row("what answers teach", "interlock.runtime.features.taught", _always),
    Row("usage ledger", "interlock.runtime.features.ledger", _always),
)


def _workers(plan: RuntimePlan) -> bool:
    """Some worker (Ollama, llama.cpp, vLLM, SGLang...) serves the plan: telemetry, placement, load
    signals and worker choice are all a worker's."""
    return bool(plan.workers)


FLEET = Row("workers", "interlock.runtime.fleet.plug", _workers)
"""The fleet's row: its module's ``plug(...) -> Fleet`` is called by ``app/parts.py`` (once per gateway)."""


class Plugged:
    """The features of one gateway: each row's ``plug`` called once, the first time a plan wants it."""

    __slots__ = ("_made", "_services", "table")

    def __init__(self, services: RequestServices, table: tuple[Row, ...] = FEATURES) -> None:
        self._services = services
        self._made: dict[str, Feature] = {}
        self.table = table

    def hooks(self, plan: RuntimePlan) -> Hooks:
        """The hooks ``plan`` runs (at plan load: never per request)."""
        rows = [row for row in self.table if row.wanted(plan)]
        features = [self._feature(row) for row in rows]
        return Hooks(
            tuple((f.admit, f.waits) for f in features if f.admit is not None),
            tuple(f.settle for f in features if f.settle is not None),
            tuple(row.name for row in rows),
            next((f.authenticate for f in features if f.authenticate is not None), None),
        )

    def _feature(self, row: Row) -> Feature:
        feature = self._made.get(row.module)
        if feature is None:
            plug: Callable[[RequestServices], Feature] = importlib.import_module(row.module).plug
            feature = self._made[row.module] = plug(self._services)
        return feature
