"""The in-process backend: this process's ``SlotTable``; the fast default for one worker process."""

from __future__ import annotations

from collections.abc import Mapping

from interlock.runtime.loaded.callers import COMMON, Turn
from interlock.runtime.loaded.tables import WorkerLimits
from interlock.runtime.state.base import Lease, SlotBackend, SlotReport
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
        self.table = SlotTable()

    @property
    def pools(self) -> dict[str, SlotPool]:
        return self.table.pools

    def configure(self, workers: Mapping[str, WorkerLimits]) -> None:
        self.table.configure(workers)

    async def acquire(
        self, worker: str, model: str, limit: int, *, wait: bool, turn: Turn = COMMON
    ) -> Lease | None:
        pool = self.table.pools[worker]
        held = pool.try_acquire(model, limit)
        if held is None:
            if not wait:
                return None
            held = await pool.acquire(model, limit, turn)
        return MemoryLease(held)

    def waiting(self, worker: str) -> int:
        pool = self.table.pools.get(worker)
        return len(pool.waiters) if pool is not None else 0

    def local(self, worker: str) -> SlotReport:
        pool = self.table.pools.get(worker)
        if pool is None:
            return SlotReport()
        return SlotReport(pool.in_use, dict(pool.per_model), len(pool.waiters), pool.rejected)

    async def report(self) -> Mapping[str, SlotReport]:
        return {name: self.local(name) for name in self.table.pools}
