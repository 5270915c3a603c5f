"""Reloading the plan: read it again (in a child process), swap it in whole when sound, say what happened.

Compiling a configuration (or reading a plan file) is the one unbounded step of a reload: a huge or
hostile file can take seconds of CPU and gigabytes of memory. Run in a thread, it still shares the
interpreter lock and the heap with the requests being answered. So a source that can split its work
(``StagedSource``: ``read`` -> plain JSON data, ``load`` -> tables) has ``read`` run in a spawned
child process, bounded by a deadline; only the cheap ``load`` (schema check, building the tables)
runs in a thread of the gateway's process. ``Reloads`` swaps the result in atomically (``swap``, given
by the composition root: what outlives a reload is configured anew, then ``Current`` is replaced), or
refuses it and keeps serving the old plan; either way the outcome is counted, kept for ``/v1/health``
and the status page (``Status.last_reload``) and, with the audit log on, audited.

How a reload reads, swaps and reports is ``reading.py``'s, imported by the first reload (a SIGHUP or
the ops app, never a request): a gateway that is never reloaded never loads it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from interlock.runtime.base.clock import Clock, iso_utc

if TYPE_CHECKING:
    from interlock.runtime.books.audit import AuditLog
    from interlock.runtime.books.metrics import Metrics
    from interlock.runtime.loaded.plan import RuntimePlan
    from interlock.runtime.request.services import Current, Status

READ_TIMEOUT_S = 120.0  # the longest a reload may spend reading/compiling before it is refused


@runtime_checkable
class StagedSource(Protocol):
    """A plan source in two steps; it must be picklable (it travels to the child process)."""

    def __call__(self) -> RuntimePlan:
        """Both steps in this process (``load(read())``): the plan at start."""

    def read(self) -> dict[str, Any]:
        """The plan as JSON data (reading the file, or compiling the configuration); PlanError if not."""

    def load(self, data: dict[str, Any]) -> RuntimePlan:
        """The runtime tables of ``data``; PlanError if it cannot be served."""


PlanSource = Callable[[], "RuntimePlan"]
"""Reads the plan again (file, or config compiled anew) with the credentials read at start. One that is
also a ``StagedSource`` reads in a child process on reload (``interlock serve``'s loader is)."""

ReloadSummary = Callable[["RuntimePlan", "RuntimePlan"], Mapping[str, Any]]
"""What a reload changed, for ``/v1/health`` and the status page: ``{"changes": [...], "changes_total": n}``,
worked out (off the event loop) by whoever composes the gateway (``commands/gateway.py``: ``interlock
diff``'s semantic diff); the runtime itself never imports the diff."""


class Reloads:
    """The gateway's reloads: one at a time, each read off the event loop, swapped in or refused."""

    __slots__ = (
        "_audit",
        "_current",
        "_lock",
        "_metrics",
        "_pending",
        "_source",
        "_status",
        "_summary",
        "_swap",
        "_timeout_s",
        "_wall",
    )

    def __init__(
        self,
        source: PlanSource | None,
        swap: Callable[[RuntimePlan], None],
        current: Current,
        status: Status,
        metrics: Metrics,
        audit: AuditLog | None,
        wall: Clock,
        *,
        summary: ReloadSummary | None = None,
        timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        self._source = source
        self._swap = swap  # configures what outlives the plan, then replaces it in ``current``
        self._current = current
        self._status = status
        self._metrics = metrics
        self._audit = audit
        self._wall = wall
        self._summary = summary
        self._timeout_s = timeout_s
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Task[bool]] = set()

    def request(self) -> None:
        """For a SIGHUP handler on the event loop: reload in the background."""
        task = asyncio.ensure_future(self.reload())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def stop(self) -> None:
        """Cancel the reloads still running (the gateway is stopping)."""
        for task in list(self._pending):
            task.cancel()

    def apply(self, plan: RuntimePlan) -> None:
        """Swap ``plan`` in; requests already running keep the one they started with."""
        self._swap(plan)
        self._status.loaded_at = iso_utc(self._wall())

    async def reload(self) -> bool:
        """Read the plan again; swap it in when sound, else keep serving the old one (logged, counted)."""
        from interlock.runtime.app.reading import reload  # the first reload: a signal, never a request

        return await reload(self)
