"""The in-process backend: this process's ``SlotTable``; the fast default for one worker process.

The table (``pool.py``, with its fair queue ``fair.py``) is the workers' slots: it is made, and its module
imported, when a plan first has workers (``configure``, at plan load); a plan without workers has no slot
to count and imports neither."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from interlock.runtime.loaded.callers import COMMON, Turn
from interlock.runtime.loaded.tables import WorkerLimits
from interlock.runtime.state.base import Lease, SlotBackend, SlotReport

if TYPE_CHECKING:
    from interlock.runtime.state.pool import SlotLease, SlotPool, SlotTable


class MemoryLease(Lease):
    __slots__ = ("held",)

    def __init__(self, held: SlotLease) -> None:
        self.held = held

    async def release(self) -> None:
        self.held.release()


class MemorySlots(SlotBackend):
    """Limits that hold within this process only."""

    scope = "process"

    def __init__(self) -> None:
        self.table: SlotTable | None = None  # made by the first plan with workers
        self._pools: dict[str, SlotPool] = {}  # the table's pools (none before it)

    @property
    def pools(self) -> dict[str, SlotPool]:
        return self._pools

    def configure(self, workers: Mapping[str, WorkerLimits]) -> None:
        if self.table is None:
            if not workers:
                return
            from interlock.runtime.state.pool import SlotTable  # at plan load: the workers' slots

            self.table = SlotTable()
            self._pools = self.table.pools
        self.table.configure(workers)

    async def acquire(
        self, worker: str, model: str, limit: int, *, wait: bool, turn: Turn = COMMON
    ) -> Lease | None:
        pool = self._pools[worker]
        held = pool.try_acquire(model, limit)
        if held is None:
            if not wait:
                return None
            held = await pool.acquire(model, limit, turn)
        return MemoryLease(held)

    def waiting(self, worker: str) -> int:
        pool = self._pools.get(worker)
        return len(pool.waiters) if pool is not None else 0

    def local(self, worker: str) -> SlotReport:
        pool = self._pools.get(worker)
        if pool is None:
            return SlotReport()
        return SlotReport(pool.in_use, dict(pool.per_model), len(pool.waiters), pool.rejected)

    async def report(self) -> Mapping[str, SlotReport]:
        return {name: self.local(name) for name in self._pools}
