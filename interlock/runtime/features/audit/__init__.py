"""The audit log: request metadata and admin actions, written by one task, never on the request path.
A row of the feature table (``features.FEATURES``, wanted by the serve settings' ``audit_log``): this
package is imported only with ``--audit-log``.

Why this boundary: operators need a durable record of who used what and what was changed, but a
request must never wait on a disk or a database, and the record must never hold a prompt, an answer
or a secret. So the request path (``Journal.finish``, once per request, whatever the surface) and the
admin paths only build a small dict of metadata (``events``: a table says which fields each kind may
carry) and append it to a bounded in-memory queue: O(1), no I/O, no await. One writer task takes
whole batches from the queue (waiting ``LINGER_S`` after the first event, so that a busy gateway
makes one write per batch, not per request) and hands them to the sink (``sinks``: a JSON-lines
file; the ledger's database). When the queue is full the event is dropped and counted
(``interlock_audit_dropped_total`` by reason ``queue_full``); a batch the sink could not store is
counted as ``sink_error`` and logged; an event that comes after shutdown began, as ``closed``.

Invariants: events reach the sink in the order they were queued; ``close`` writes out what is queued
before returning; every event is either written, or counted as dropped, exactly once.

Where it plugs in (``plug``): ``finish`` (the request's line, after the journal took the record),
``action`` (an admin or security line), ``start`` and ``stop`` (the writer task), and the metrics' seat
(``StateView.audit``: its counters). Other parts of the gateway write a line through the plan's hooks::

    action = services.current.hooks.action  # None without --audit-log
    if action is not None:
        action("credit_change", tenant="team-a", delta=-1000, balance=5000, unit="tokens")
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from interlock.runtime.features import Feature, Settings
from interlock.runtime.features.audit.events import ACTIONS, Scalar, action_event, request_event
from interlock.runtime.features.audit.sinks import SINKS, Sink, SinkError, open_sink

if TYPE_CHECKING:
    from interlock.runtime.books.record import RequestRecord
    from interlock.runtime.request.services import RequestServices

__all__ = ["ACTIONS", "SINKS", "AuditLog", "Sink", "SinkError", "families", "open_sink", "plug"]

log = logging.getLogger("interlock.audit")

QUEUE_EVENTS = 10_000  # events waiting for the writer at most; more are dropped and counted
BATCH_EVENTS = 512  # the most events handed to the sink in one write
LINGER_S = 0.05  # after the first event, the writer waits this long for more: one write for many
DROP_REASONS = ("queue_full", "sink_error", "closed")


@dataclass(eq=False, repr=False)
class AuditLog:
    """A bounded queue of audit events and the one task that writes them to ``sink``."""

    sink: Sink
    _: KW_ONLY
    capacity: int = QUEUE_EVENTS
    batch: int = BATCH_EVENTS
    linger_s: float = LINGER_S
    wall: Callable[[], float] = time.time
    queue: deque[dict[str, Any]] = field(default_factory=deque, init=False)
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0), init=False)
    written: int = field(default=0, init=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _writer: asyncio.Task[None] | None = field(default=None, init=False)
    _closing: bool = field(default=False, init=False)

    # -- the producers' side: O(1), never awaits ------------------------------------------------------

    def request(self, record: RequestRecord) -> None:
        """A finished request (called once, by ``Journal.finish``)."""
        self._put(request_event(record))

    def action(self, action: str, **fields: Scalar) -> None:
        """An admin or security action: a row of ``ACTIONS`` with its fields (``ValueError`` else)."""
        self._put(action_event(action, fields, self.wall()))

    def _put(self, event: dict[str, Any]) -> None:
        if len(self.queue) >= self.capacity:
            self.dropped["queue_full"] += 1
            return
        if self._closing:  # the writer is finishing: nothing would write it
            self.dropped["closed"] += 1
            return
        self.queue.append(event)
        if not self._wake.is_set():
            self._wake.set()

    # -- the writer ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the writer task (inside the running loop)."""
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_forever(), name="audit")

    async def close(self) -> None:
        """Write out what is queued, stop the writer and close the sink."""
        self._closing = True
        self._wake.set()
        if self._writer is not None:
            await self._writer
            self._writer = None
        else:  # never started: write what there is now
            await self._drain()
        await self.sink.close()

    async def _write_forever(self) -> None:
        while True:
            await self._wake.wait()
            if self.linger_s and len(self.queue) < self.batch and not self._closing:
                await asyncio.sleep(self.linger_s)  # gather a batch: one thread hop, one write
            self._wake.clear()
            await self._drain()
            if self._closing:
                return

    async def _drain(self) -> None:
        queue = self.queue
        while queue:
            batch = [queue.popleft() for _ in range(min(self.batch, len(queue)))]
            try:
                await self.sink.write(batch)
            except (OSError, SinkError) as exc:
                self.dropped["sink_error"] += len(batch)
                log.error(
                    "audit log %s: %d event(s) could not be written (%s)", self.sink.describe, len(batch), exc
                )
            except Exception:  # a sink's bug: counted and logged, the writer keeps going
                self.dropped["sink_error"] += len(batch)
                log.exception("audit log %s: %d event(s) lost", self.sink.describe, len(batch))
            else:
                self.written += len(batch)


def plug(services: RequestServices, settings: Settings) -> Feature:
    """The audit log of this process, on the sink ``--audit-log`` names, plugged in: its counters in the
    metrics, its lines at ``finish`` and ``action``, its writer started and stopped with the gateway."""
    assert settings.audit_log is not None  # (the row is wanted only then)
    return plugged(services, AuditLog(open_sink(settings.audit_log)))


def plugged(services: RequestServices, audit: AuditLog) -> Feature:
    """``audit``'s hooks (a test or bench hands its own log, on its own sink)."""
    services.metrics.view.audit = functools.partial(families, audit)

    async def start() -> None:
        audit.start()

    return Feature(finish=audit.request, action=audit.action, start=start, stop=audit.close)


def families(audit: AuditLog | None) -> tuple[Metric, ...]:
    """The audit log's counters (``/metrics``, with ``--audit-log``; a test may ask for them without)."""
    dropped = CounterMetricFamily(
        "interlock_audit_dropped",
        "Audit events lost, by reason: queue_full (the writer fell behind), sink_error, closed.",
        labels=["reason"],
    )
    written = CounterMetricFamily("interlock_audit_written", "Audit events written to the audit sink.")
    queued = GaugeMetricFamily("interlock_audit_queued", "Audit events waiting for the writer.")
    if audit is not None:
        for reason, count in audit.dropped.items():
            dropped.add_metric([reason], float(count))
        written.add_metric([], float(audit.written))
        queued.add_metric([], float(len(audit.queue)))
    return dropped, written, queued
