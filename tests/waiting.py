"""Waiting on state in tests: ``wait_until`` from a test's thread, ``until`` on the event loop.

Every wait is on a state the test can see (a counter, a file, a report); the deadline only bounds a
failure (a hang), it is never the behaviour under test, so it is long (``PATIENCE_S``).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

PATIENCE_S = 60.0  # how long a check waits on the other side (a thread, a socket, a store): a failure bound


def wait_until(check: Callable[[], object], timeout_s: float = PATIENCE_S, what: str = "the state") -> None:
    """Poll ``check`` from this thread until it is true; ``AssertionError`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.02)


async def until(
    check: Callable[[], object | Awaitable[object]],
    what: str = "the state",
    *,
    timeout_s: float = PATIENCE_S,
    pause_s: float = 0.01,
) -> None:
    """Poll ``check`` (plain or async) on the event loop, letting other tasks run between polls
    (``pause_s=0``: one turn of the loop); ``AssertionError`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(pause_s)
