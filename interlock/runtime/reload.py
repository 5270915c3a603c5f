"""Reading a new plan for a reload in a child process, so that no configuration can stall the gateway.

Compiling a configuration (or reading a plan file) is the one unbounded step of a reload: a huge or
hostile file can take seconds of CPU and gigabytes of memory. Run in a thread, it still shares the
interpreter lock and the heap with the requests being answered. So a source that can split its work
(``StagedSource``: ``read`` -> plain JSON data, ``load`` -> tables) has ``read`` run in a spawned
child process, bounded by a deadline; only the cheap ``load`` (schema check, building the tables)
runs in a thread of the gateway's process. The caller swaps the result in atomically.

    PlanError (from runtime.plan)   the child refused the plan, died, or ran past the deadline
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol, runtime_checkable

from interlock.collector import collector_paused
from interlock.runtime.plan import PlanError, RuntimePlan

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
