"""A reload's reading (``reload.Reloads.reload``): the plan read off the event loop, a ``StagedSource`` in
a spawned child process bounded by a deadline, any other source in a thread. Imported by the first
reload (a signal or the ops app), never by a request.

    PlanError (from loaded/plan.py)   the child refused the plan, died, or ran past the deadline
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol, runtime_checkable

from interlock.common.gc_pause import collector_paused
from interlock.runtime.loaded.plan import PlanError, RuntimePlan


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
