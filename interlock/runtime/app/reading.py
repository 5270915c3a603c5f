"""A reload's work (``reload.Reloads.reload``): the plan read off the event loop (a ``StagedSource`` in a
spawned child process bounded by a deadline, any other source in a thread), swapped in or refused, the
outcome counted, kept and audited. Imported by the first reload (a signal), never by a request.

    PlanError (from loaded/plan.py)   the child refused the plan, died, or ran past the deadline
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from interlock.common.gc_pause import collector_paused
from interlock.runtime.base.clock import Clock, iso_utc
from interlock.runtime.loaded.plan import PlanError, RuntimePlan

if TYPE_CHECKING:
    from interlock.runtime.books.metrics import Metrics
    from interlock.runtime.request.services import Current, Status

log = logging.getLogger("interlock")


@runtime_checkable
class StagedSource(Protocol):
    """A plan source in two steps; it must be picklable (it travels to the child process)."""

    def __call__(self) -> RuntimePlan:
        """Both steps in this process (``load(read())``): the plan at start."""

    def read(self) -> dict[str, Any]:
        """The plan as JSON data (reading the file, or compiling the configuration); PlanError if not."""

    def load(self, data: dict[str, Any]) -> RuntimePlan:
        """The runtime tables of ``data``; PlanError if it cannot be served."""


async def read_in_child(read: Callable[[], dict[str, Any]], timeout_s: float) -> dict[str, Any]:
    """``read()`` in a fresh child process; its result, or PlanError. The event loop only waits on the
    pipe (a reader callback): cancelling (the gateway stopping) or the deadline kills the child."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(read, sender), name="interlock-reload", daemon=True)
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not answered.done():
            answered.set_result(None)

    loop.add_reader(receiver.fileno(), wake)
    try:
        child.start()  # fork + exec and a few KB down a pipe: milliseconds
        sender.close()
        try:
            async with asyncio.timeout(timeout_s):
                await answered  # the answer, or EOF when the child died without one
        except TimeoutError:
            raise PlanError(
                f"reading the new plan took longer than {timeout_s:g} s; it was stopped"
            ) from None
        # The loop's reader (uvloop's) made the pipe non-blocking; a plan larger than the pipe's buffer
        # then arrives in pieces, and a non-blocking recv() fails between them (BlockingIOError).
        loop.remove_reader(receiver.fileno())
        os.set_blocking(receiver.fileno(), True)
        try:
            ok, value = await asyncio.to_thread(_receive, receiver)
        except EOFError:
            await asyncio.to_thread(child.join, 5)
            raise PlanError(f"the process reading the new plan died (exit code {child.exitcode})") from None
    finally:
        loop.remove_reader(receiver.fileno())
        receiver.close()
        sender.close()
        if child.is_alive():
            child.kill()
        if child.pid is not None:  # reaped in a thread, which the loop's shutdown waits for
            await asyncio.to_thread(child.join, 5)
    if not ok:
        raise PlanError(value)
    data: dict[str, Any] = value
    return data


def _child(read: Callable[[], dict[str, Any]], sender: Connection) -> None:
    """In the child: run ``read`` and send ``(True, data)`` or ``(False, message)`` back."""
    try:
        result: tuple[bool, Any] = (True, read())
    except PlanError as exc:
        result = (False, str(exc))
    except Exception as exc:  # anything else from reading or compiling: reported, never a traceback
        result = (False, f"{type(exc).__name__}: {exc}")
    sender.send(result)
    sender.close()


def _receive(receiver: Connection) -> Any:
    """The child's answer, unpickled with the collector paused (a big plan is many objects, all kept)."""
    with collector_paused():
        return receiver.recv()


async def read_plan(source: Callable[[], RuntimePlan], timeout_s: float) -> RuntimePlan:
    """Off the event loop: a staged source reads (compiles) in a child process, then loads in a
    thread; any other source runs in a thread."""
    if isinstance(source, StagedSource):
        data = await read_in_child(source.read, timeout_s)
        return await asyncio.to_thread(source.load, data)
    return await asyncio.to_thread(source)


NO_SUMMARY: Mapping[str, Any] = {"changes": [], "changes_total": 0}


class Reading:
    """What ``reload.Reloads`` runs for each reload (under its lock): read the plan from ``source``, swap
    it in (``apply``) or refuse it, and log, count, keep and audit the outcome."""

    def __init__(
        self,
        apply: Callable[[RuntimePlan], None],
        current: Current,
        status: Status,
        metrics: Metrics,
        wall: Clock,
        summary: Callable[[RuntimePlan, RuntimePlan], Mapping[str, Any]] | None,
        timeout_s: float,
    ) -> None:
        self.apply = apply
        self._current = current
        self._status = status
        self._metrics = metrics
        self._wall = wall
        self._summary = summary
        self._timeout_s = timeout_s

    async def reload(self, source: Callable[[], RuntimePlan]) -> bool:
        """Read the plan again; swap it in when sound, else keep serving the old one (logged, counted)."""
        log.debug("reload: reading the plan again")
        try:
            plan = await read_plan(source, self._timeout_s)
        except PlanError as exc:
            return self.refused(str(exc))
        except Exception as exc:  # anything else from reading or compiling: refuse, keep serving
            return self.refused(f"{type(exc).__name__}: {exc}")
        old = self._current.plan
        try:
            self.apply(plan)
        except Exception as exc:  # a module it plugs in failed to load: the old plan serves on, whole
            log.error("reload: the plan could not be plugged in", exc_info=True)
            return self.refused(f"{type(exc).__name__}: {exc}")
        self._metrics.plan_reloads.labels("loaded").inc()
        summary = self._summary
        self._status.last_reload = last = {
            "at": iso_utc(self._wall()),
            "result": "loaded",
            "error": None,
            "from": old.content_hash,
            "to": plan.content_hash,
            **(await asyncio.to_thread(summary, old, plan) if summary is not None else NO_SUMMARY),
        }
        log.info("plan reloaded: %s -> %s", old.content_hash, plan.content_hash)
        audit = self._current.hooks.action  # the audit log's (``--audit-log``), else None
        if audit is not None:
            hashes = {"from_plan": old.content_hash, "to_plan": plan.content_hash}
            audit("reload", outcome="loaded", **hashes, changes=last["changes_total"])
            from interlock.runtime.features.audit.keys import access_changes  # audit on

            for action, fields in access_changes(old.source.access, plan.source.access):
                audit(action, **fields)
        return True

    def refused(self, reason: str) -> bool:
        served = self._current.plan.content_hash
        log.error("plan reload refused; still serving %s: %s", served, reason)
        self._metrics.plan_reloads.labels("refused").inc()
        self._status.last_reload = {
            "at": iso_utc(self._wall()),
            "result": "refused",
            "error": reason,
            "from": served,
            "to": None,
            "changes": [],
            "changes_total": 0,
        }
        audit = self._current.hooks.action
        if audit is not None:
            audit("reload", outcome="refused", from_plan=served, to_plan=None, error=reason)
        return False
