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

Four more points, for what watches a request rather than changes it (the tracing and the audit log):

- ``begin``: when the request's record is made, before the body is read (one feature: the request's
  span, kept on the record and ended with it);
- ``attempt``: around each upstream call the router makes (the attempt's span);
- ``skip``: a candidate the router passed over without a call (an event on the span);
- ``finish``: the finished record, after the journal took it (the audit line);

and ``action``, the audit log's admin and security lines (a refused key, a reload), and ``start`` /
``stop``, run with the gateway's lifespan (``Plugged.start`` / ``Plugged.stop``).

``FEATURES`` is the table: one row per feature, its module's import path, and whether a plan wants it,
from the plan and the serve settings (``Settings``: ``--audit-log``, ``--otel``, fixed for the
process). At plan load (and again at every reload) ``Plugged.hooks`` keeps the rows wanted and imports
their modules then (``importlib``, as ``interlock.common.kinds`` does for adapters): a plan without keys,
budgets or sticky sessions, served without ``--audit-log`` or ``--otel``, never imports those modules,
and its requests loop over empty tuples and test None once per point. Each module has one
``plug(services, settings) -> Feature``, called once per gateway.

To add a feature: one folder or module here with a ``plug``, and one row in ``FEATURES``.

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
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from interlock.runtime.request.services import (
    Action,
    Admit,
    Attempt,
    Authenticate,
    Begin,
    Finish,
    Hooks,
    Settle,
    Skip,
)

if TYPE_CHECKING:
    from interlock.runtime.loaded.plan import RuntimePlan
    from interlock.runtime.request.services import RequestServices

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Feature:
    """One feature's hooks at the lifecycle's points (None: not at that point)."""

    admit: Admit | None = None
    waits: bool = False  # ``admit`` is a coroutine function (else called as it is: no coroutine made)
    settle: Settle | None = None
    authenticate: Authenticate | None = None  # before the body is read (one feature: the keys)
    begin: Begin | None = None  # the request's record made (one feature: the tracing's span)
    attempt: Attempt | None = None  # around each upstream call (one feature: the tracing)
    skip: Skip | None = None  # a candidate passed over without a call (one feature: the tracing)
    finish: Finish | None = None  # the finished record, after the journal (the audit line)
    action: Action | None = None  # an admin or security line (one feature: the audit log)
    start: Callable[[], Awaitable[None]] | None = None  # with the gateway's lifespan, in table order
    stop: Callable[[], Awaitable[None]] | None = None  # at shutdown, in reverse


@dataclass(frozen=True, slots=True)
class Settings:
    """The serve settings a row may want (``interlock serve``'s flags): fixed for the process, so a row
    wanted by them is plugged at start and stays."""

    audit_log: str | None = None  # ``--audit-log TARGET``: the audit log's sink
    otel: bool = False  # ``--otel``: OpenTelemetry tracing, configured by ``environ``'s ``OTEL_*``
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)


NO_SETTINGS = Settings(environ={})
"""A gateway served without ``--audit-log`` or ``--otel`` (tests, benches, embedded use)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One feature: ``module`` (an import path, imported only when wanted) has ``plug``; ``wanted``
    reads the plan and the serve settings."""

    name: str
    module: str
    wanted: Callable[[RuntimePlan, Settings], bool]


def _tracing(plan: RuntimePlan, settings: Settings) -> bool:
    return settings.otel


def _audit(plan: RuntimePlan, settings: Settings) -> bool:
    return settings.audit_log is not None


def _keys(plan: RuntimePlan, settings: Settings) -> bool:
    return plan.keys is not None


def _budgets(plan: RuntimePlan, settings: Settings) -> bool:
    """Some key (or its tenant) has credits or rates: a plan with keys but no budgets runs none of it."""
    keys = plan.keys
    if keys is None:
        return False
    callers = [*keys.by_digest.values(), *(entry[2] for entry in keys.by_id.values())]
    return any(caller.credits or caller.budgets for caller in callers)


def _sticky(plan: RuntimePlan, settings: Settings) -> bool:
    return plan.routing.sticky is not None


def _always(plan: RuntimePlan, settings: Settings) -> bool:
    return True


FEATURES: tuple[Row, ...] = (
    Row("tracing", "interlock.runtime.features.tracing", _tracing),  # first: its span spans all
    Row("audit log", "interlock.runtime.features.audit", _audit),
    Row("sticky sessions", "interlock.runtime.features.sticky", _sticky),
    Row("caller keys", "interlock.runtime.features.keys", _keys),  # before the budgets: its target
    Row("credits and budgets", "interlock.runtime.features.budgets", _budgets),
    Row("what answers teach", "interlock.runtime.features.taught", _always),
    Row("usage ledger", "interlock.runtime.features.ledger", _always),
)


def _workers(plan: RuntimePlan, settings: Settings) -> bool:
    """Some worker (Ollama, llama.cpp, vLLM, SGLang...) serves the plan: telemetry, placement, load
    signals and worker choice are all a worker's."""
    return bool(plan.workers)


FLEET = Row("workers", "interlock.runtime.fleet.plug", _workers)
"""The fleet's row: its module's ``plug(...) -> Fleet`` is called by ``app/parts.py`` (once per gateway)."""


class Plugged:
    """The features of one gateway: each row's ``plug`` called once, the first time it is wanted."""

    __slots__ = ("_made", "_services", "settings", "table")

    def __init__(
        self,
        services: RequestServices,
        settings: Settings = NO_SETTINGS,
        table: tuple[Row, ...] = FEATURES,
    ) -> None:
        self._services = services
        self._made: dict[str, Feature] = {}
        self.settings = settings
        self.table = table

    def wants(self, row: Row, plan: RuntimePlan) -> bool:
        return row.wanted(plan, self.settings)

    def hooks(self, plan: RuntimePlan) -> Hooks:
        """The hooks ``plan`` runs (at plan load: never per request)."""
        rows = [row for row in self.table if row.wanted(plan, self.settings)]
        features = [self._feature(row) for row in rows]
        return Hooks(
            tuple((f.admit, f.waits) for f in features if f.admit is not None),
            tuple(f.settle for f in features if f.settle is not None),
            tuple(row.name for row in rows),
            _one(f.authenticate for f in features),
            _one(f.begin for f in features),
            _one(f.attempt for f in features),
            _one(f.skip for f in features),
            tuple(f.finish for f in features if f.finish is not None),
            _one(f.action for f in features),
        )

    async def start(self) -> None:
        """The lifespan's start: what the features plugged so far run beside the requests, in table
        order. (The rows with a ``start``, the audit log, are wanted by the serve settings: plugged at
        the first plan, before the gateway starts.)"""
        for feature in self._made.values():
            if feature.start is not None:
                await feature.start()

    async def stop(self) -> None:
        """At shutdown, in reverse: the audit log written out, the last spans exported."""
        for feature in reversed(self._made.values()):
            if feature.stop is not None:
                await feature.stop()

    def _feature(self, row: Row) -> Feature:
        feature = self._made.get(row.module)
        if feature is None:
            plug: Callable[[RequestServices, Settings], Feature] = importlib.import_module(row.module).plug
            feature = self._made[row.module] = plug(self._services, self.settings)
        return feature


def _one(hooks: Iterable[T | None]) -> T | None:
    """The hook at a point only one feature fills (the first, in table order), or None."""
    return next((hook for hook in hooks if hook is not None), None)
