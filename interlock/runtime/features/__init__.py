"""The feature table: what plugs into the request lifecycle's named points, settled at plan load.

The lifecycle (``runtime/request/lifecycle.py``) is the core: read, resolve, estimate, walk, answer,
meter. A feature is one module (or folder) here that plugs in at its points, beside the guard chain:
``authenticate`` (before the body is read: the caller keys' refusal is answered there); ``admit``
(after the request is read and resolved, before the walk: refuse by raising, narrow the target, cut
the output limit, or take a stake, ``Exchange.stake``, settled however the request ends); ``settle``
(after the walk, when an upstream answered, with its metered ``Tally``, before the stakes are
released); and what watches a request (the tracing, the audit log): ``begin``, ``attempt``, ``skip``,
``finish``, ``action``, ``start``/``stop`` (with the lifespan).

``FEATURES`` is the table: a row per feature, its module, and whether the plan and the serve settings
(``Settings``) want it. ``Plugged.hooks`` keeps the rows wanted at plan load and imports their modules
then: a plan without keys, budgets or sticky sessions, served without ``--audit-log`` or ``--otel``,
never imports them, and its requests loop over empty tuples or test None at each point. Each module
has one ``plug(services, settings) -> Feature``, called once per gateway. To add a feature: a module
here with a ``plug``, and a row. ``FLEET`` plugs in a part rather than hooks: the workers
(``fleet/plug.py``), seated by ``app/parts.py::FleetSeat`` the first time a plan has workers.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from interlock.runtime.request.services import Hooks

if TYPE_CHECKING:
    from interlock.runtime.loaded.plan import RuntimePlan
    from interlock.runtime.request import router, services
    from interlock.runtime.request.services import RequestServices

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Feature:
    """One feature's hooks at the lifecycle's points (None: not at that point)."""

    admit: services.Admit | None = None
    waits: bool = False  # ``admit`` is a coroutine function (else called as it is: no coroutine made)
    settle: services.Settle | None = None
    authenticate: services.Authenticate | None = None  # before the body is read (one feature: the keys)
    begin: services.Begin | None = None  # the request's record made (one feature: the tracing's span)
    attempt: router.Attempt | None = None  # around each upstream call (one feature: the tracing)
    skip: router.Skip | None = None  # a candidate passed over without a call (one feature: the tracing)
    finish: services.Finish | None = None  # the finished record, after the journal (the audit line)
    action: services.Action | None = None  # an admin or security line (one feature: the audit log)
    start: Callable[[], Awaitable[None]] | None = None  # with the gateway's lifespan, in table order
    stop: Callable[[], Awaitable[None]] | None = None  # at shutdown, in reverse


@dataclass(frozen=True, slots=True)
class Settings:
    """The serve settings a row may want (``interlock serve``'s flags): fixed for the process, so a row
    wanted by them is plugged at start and stays."""

    audit_log: str | None = None  # ``--audit-log TARGET``: the audit log's sink
    otel: bool = False  # ``--otel``: OpenTelemetry tracing, configured by ``environ``'s ``OTEL_*``
    environ: Mapping[str, str] = field(default_factory=dict)


NO_SETTINGS = Settings()  # served without ``--audit-log`` or ``--otel`` (tests, benches, embedded use)


@dataclass(frozen=True, slots=True)
class Row:
    """One feature: ``module`` (an import path, imported only when wanted) has ``plug``; ``wanted``
    reads the plan and the serve settings."""

    name: str
    module: str
    wanted: Callable[[RuntimePlan, Settings], bool]


def _budgets(plan: RuntimePlan, settings: Settings) -> bool:
    """Some key (or its tenant) has credits or rates: a plan with keys but no budgets runs none of it."""
    keys = plan.keys
    if keys is None:
        return False
    callers = [*keys.by_digest.values(), *(entry[2] for entry in keys.by_id.values())]
    return any(caller.credits or caller.budgets for caller in callers)


HERE = "interlock.runtime.features."
FEATURES: tuple[Row, ...] = (
    Row("tracing", HERE + "tracing", lambda _, serve: serve.otel),  # first: its span holds the rest
    Row("audit log", HERE + "audit", lambda _, serve: serve.audit_log is not None),
    Row("sticky sessions", HERE + "sticky", lambda plan, _: plan.routing.sticky is not None),
    Row("caller keys", HERE + "keys", lambda plan, _: plan.keys is not None),  # before the budgets
    Row("credits and budgets", HERE + "budgets", _budgets),
    Row("what answers teach", HERE + "taught", lambda _, __: True),
    Row("usage ledger", HERE + "ledger", lambda _, __: True),
)


# telemetry, placement, load signals and worker choice are all a worker's (Ollama, llama.cpp, vLLM...)
FLEET = Row("workers", "interlock.runtime.fleet.plug", lambda plan, _: bool(plan.workers))


class Plugged:
    """The features of one gateway: each row's ``plug`` called once, the first time it is wanted."""

    __slots__ = ("_made", "_services", "settings")

    def __init__(self, services: RequestServices, settings: Settings = NO_SETTINGS) -> None:
        self._services = services
        self._made: dict[str, Feature] = {}
        self.settings = settings

    def hooks(self, plan: RuntimePlan) -> Hooks:
        """The hooks ``plan`` runs (at plan load: never per request)."""
        rows = [row for row in FEATURES if row.wanted(plan, self.settings)]
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
        """The lifespan's first step: the features' ``start`` (those of the serve settings' rows, plugged
        at the first plan: the audit log's writer), in table order."""
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
