"""A reload's work (``reload.Reloads.reload``): read the plan off the event loop (a ``StagedSource`` in a
spawned child process, bounded by a deadline; any other source in a thread), swap it in or refuse it,
and count, keep and audit the outcome. Imported by the first reload, never by a request.

    PlanError (from loaded/plan.py)   the child refused the plan, died, or ran past the deadline
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from interlock.common.gc_pause import collector_paused
from interlock.runtime.app.reload import READ_TIMEOUT_S, PlanSource, StagedSource
from interlock.runtime.base.clock import iso_utc
from interlock.runtime.loaded.plan import PlanError, RuntimePlan

if TYPE_CHECKING:
    from interlock.runtime.app.reload import Reloads

log = logging.getLogger("interlock")

NO_SUMMARY: Mapping[str, Any] = {"changes": [], "changes_total": 0}


async def read_in_child(
    read: Callable[[], dict[str, Any]], timeout_s: float = READ_TIMEOUT_S
) -> dict[str, Any]:
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


async def reload(reloads: Reloads) -> bool:
    """Read the plan again; swap it in when sound, else keep serving the old one (logged, counted)."""
    async with reloads._lock:
        if reloads._source is None:
            log.warning("reload requested, but this gateway was not given a plan file to reload")
            return False
        log.debug("reload: reading the plan again")
        try:
            plan = await _read(reloads._source, reloads._timeout_s)
        except PlanError as exc:
            return _refused(reloads, str(exc))
        except Exception as exc:  # anything else from reading or compiling: refuse, keep serving
            return _refused(reloads, f"{type(exc).__name__}: {exc}")
        old = reloads._current.plan
        try:
            reloads.apply(plan)
        except Exception as exc:  # a module it plugs in failed to load: the old plan serves on, whole
            log.error("reload: the plan could not be plugged in", exc_info=True)
            return _refused(reloads, f"{type(exc).__name__}: {exc}")
        reloads._metrics.plan_reloads.labels("loaded").inc()
        summary = reloads._summary
        reloads._status.last_reload = last = {
            "at": iso_utc(reloads._wall()),
            "result": "loaded",
            "error": None,
            "from": old.content_hash,
            "to": plan.content_hash,
            **(await asyncio.to_thread(summary, old, plan) if summary is not None else NO_SUMMARY),
        }
        log.info("plan reloaded: %s -> %s", old.content_hash, plan.content_hash)
        if reloads._audit is not None:
            changes = last["changes_total"]
            reloads._audit.action(
                "reload",
                outcome="loaded",
                from_plan=old.content_hash,
                to_plan=plan.content_hash,
                changes=changes,
            )
            from interlock.runtime.books.audit.keys import access_changes  # audit on: loaded

            for action, fields in access_changes(old.source.access, plan.source.access):
                reloads._audit.action(action, **fields)
        return True


async def _read(source: PlanSource, timeout_s: float) -> RuntimePlan:
    """Off the event loop: a staged source reads (compiles) in a child process, then loads in a
    thread; any other source runs in a thread."""
    if isinstance(source, StagedSource):
        data = await read_in_child(source.read, timeout_s)
        return await asyncio.to_thread(source.load, data)
    return await asyncio.to_thread(source)


def _refused(reloads: Reloads, reason: str) -> bool:
    served = reloads._current.plan.content_hash
    log.error("plan reload refused; still serving %s: %s", served, reason)
    reloads._metrics.plan_reloads.labels("refused").inc()
    reloads._status.last_reload = {
        "at": iso_utc(reloads._wall()),
        "result": "refused",
        "error": reason,
        "from": served,
        "to": None,
        "changes": [],
        "changes_total": 0,
    }
    if reloads._audit is not None:
        reloads._audit.action("reload", outcome="refused", from_plan=served, to_plan=None, error=reason)
    return False
