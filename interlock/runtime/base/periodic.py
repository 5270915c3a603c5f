"""A round of work repeated beside the request path: health probes, GPU telemetry, utilisation samples.

Each loop owns one asyncio task, started once the server runs and stopped (cancelled, then awaited) when
it stops; ``stop`` may be called twice. A round that fails is logged and the next one still runs: a bug
in one round, or a store that went away, must never end the loop for good. Tests run one round directly
(``probe_all``, ``collect_all``, ``take``) instead of waiting for the task: nothing here is timed by a test.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from typing import ClassVar


class Periodic(abc.ABC):
    """One background loop: ``round`` repeated, ``pause_s`` apart, until ``stop``."""

    task_name: ClassVar[str]
    """The asyncio task's name (``interlock-probes``...)."""
    log: ClassVar[logging.Logger]
    failed: ClassVar[str]
    """What the log says when a round fails."""
    _task: asyncio.Task[None] | None = None
    _wake: asyncio.Event | None = None

    @abc.abstractmethod
    async def round(self) -> None:
        """One round of the loop's work."""

    @abc.abstractmethod
    def pause_s(self) -> float:
        """Seconds from the end of one round to the start of the next (read each time: plans reload)."""

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.task_name)

    def wake(self) -> None:
        """Run the next round now, not at the end of the pause (a no-op while the loop is not running)."""
        if self._wake is not None:
            self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.round()
            except Exception:  # see the module docstring: one bad round never ends the loop
                self.log.exception(self.failed)
            wake = self._wake
            if wake is None:
                await asyncio.sleep(self.pause_s())
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), self.pause_s())
            wake.clear()
