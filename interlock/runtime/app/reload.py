"""Reloading the plan: read it again (in a child process), swap it in whole when sound, say what happened.

Compiling a configuration (or reading a plan file) is the one unbounded step of a reload: a huge or
hostile file can take seconds of CPU and gigabytes of memory. Run in a thread, it still shares the
interpreter lock and the heap with the requests being answered. So a source that can split its work
(``reading.StagedSource``: ``read`` -> plain JSON data, ``load`` -> tables) has ``read`` run in a spawned
child process, bounded by a deadline; only the cheap ``load`` (schema check, building the tables)
runs in a thread of the gateway's process. ``Reloads`` swaps the result in atomically (``swap``, given
by the composition root: what outlives a reload is configured anew, then ``Current`` is replaced), or
refuses it and keeps serving the old plan; either way the outcome is counted, kept for ``/v1/health``
and the status page (``Status.last_reload``) and, with the audit log on, audited. All that is
``reading.py``'s, imported by the first reload (a signal, never a request).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from interlock.runtime.base.clock import Clock, iso_utc
from interlock.runtime.loaded.plan import RuntimePlan

if TYPE_CHECKING:
    from interlock.runtime.app.reading import Reading
    from interlock.runtime.books.metrics import Metrics
    from interlock.runtime.request.services import Current, Status

log = logging.getLogger("interlock")

READ_TIMEOUT_S = 120.0  # the longest a reload may spend reading/compiling before it is refused


PlanSource = Callable[[], RuntimePlan]
"""Reads the plan again (file, or config compiled anew) with the credentials read at start. One that is
also a ``reading.StagedSource`` reads in a child process on reload (``interlock serve``'s loader is)."""

ReloadSummary = Callable[[RuntimePlan, RuntimePlan], Mapping[str, Any]]
"""What a reload changed, for ``/v1/health`` and the status page: ``{"changes": [...], "changes_total": n}``,
worked out (off the event loop) by whoever composes the gateway (``commands/gateway.py``: ``interlock
diff``'s semantic diff); the runtime itself never imports the diff."""


class Reloads:
    """The gateway's reloads: one at a time, each read off the event loop, swapped in or refused."""

    __slots__ = ("_given", "_lock", "_pending", "_reading", "_source", "_status", "_swap", "_wall")

    def __init__(
        self,
        source: PlanSource | None,
        swap: Callable[[RuntimePlan], None],
        current: Current,
        status: Status,
        metrics: Metrics,
        wall: Clock,
        *,
        summary: ReloadSummary | None = None,
        timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        self._source = source
        self._swap = swap  # configures what outlives the plan, then replaces it in ``current``
        self._status = status
        self._wall = wall
        self._given = (current, status, metrics, wall, summary, timeout_s)  # the first reload's ``Reading``
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Task[bool]] = set()
        self._reading: Reading | None = None  # what reloads run: made by the first

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
        async with self._lock:
            if self._source is None:
                log.warning("reload requested, but this gateway was not given a plan file to reload")
                return False
            return await self._reader().reload(self._source)

    def _refused(self, reason: str) -> bool:
        """Refuse a reload for ``reason``: logged, counted, kept and audited (``reading.Reading``)."""
        return self._reader().refused(reason)

    def _reader(self) -> Reading:
        if self._reading is None:
            from interlock.runtime.app.reading import Reading  # the first reload: a signal, never a request

            self._reading = Reading(self.apply, *self._given)
        return self._reading
