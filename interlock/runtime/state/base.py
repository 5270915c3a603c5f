"""The slot seam's types: what a backend is asked (``SlotBackend``), what it hands back (``Lease``) and
reports (``SlotReport``)."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from interlock.runtime.loaded.callers import COMMON, Turn
from interlock.runtime.loaded.tables import WorkerLimits

if TYPE_CHECKING:
    from interlock.runtime.state.counters import CallerCounters


class SharedHealth(Protocol):
    """What a shared store needs of the health book (``books.health.HealthBook``) to share circuits: it
    listens to the book's openings and closings and applies the other replicas'. Named here, so that the
    store stands below the books."""

    listener: Callable[[str, float], None] | None
    candidate_listener: Callable[[str, float], None] | None

    def apply_shared(self, label: str, open_for_s: float) -> None: ...

    def apply_shared_candidate(self, cid: str, open_for_s: float) -> None: ...


class StateUnreachable(Exception):
    """The store behind a backend cannot be reached (raised and caught inside the backends)."""


@dataclass(frozen=True, slots=True)
class SlotReport:
    """One worker's slots as one backend sees them."""

    in_use: int = 0
    per_model: Mapping[str, int] = field(default_factory=dict)
    waiting: int = 0
    rejected: int = 0


class Lease(abc.ABC):
    """One held slot. ``release`` is idempotent and never raises."""

    __slots__ = ()

    @abc.abstractmethod
    async def release(self) -> None: ...


class SharedLearning(abc.ABC):
    """What answers taught, shared by replicas through the store: rows in, rows out (JSON-ready dicts,
    checked by the books that read them); never raises (an unreachable store: nothing shared)."""

    @abc.abstractmethod
    async def push(self, rows: Mapping[str, Mapping[str, object]]) -> None:
        """This replica's newer rows, by a name each (the same name replaces the row)."""

    @abc.abstractmethod
    async def pull(self) -> dict[str, object]:
        """Every replica's rows by name (decoded; malformed ones left out)."""


class SlotBackend(abc.ABC):
    """Slots (per worker and per model) with the bounded fair queue; one instance per gateway process."""

    scope: str = "process"  # what the limits span: "process" or "host"
    fallbacks: int = 0  # times the store was lost or unreachable (each starts per-process limits)
    _counters: CallerCounters | None = None  # the callers' counters, once asked for

    @abc.abstractmethod
    def configure(self, workers: Mapping[str, WorkerLimits]) -> None:
        """The current plan's bounds; known workers keep their held slots."""

    @abc.abstractmethod
    async def acquire(
        self, worker: str, model: str, limit: int, *, wait: bool, turn: Turn = COMMON
    ) -> Lease | None:
        """A slot now; else (``wait``) after queueing in ``turn``'s place (``fair.py``),
        ``SlotUnavailable`` past the queue; else None."""

    @abc.abstractmethod
    def waiting(self, worker: str) -> int:
        """Requests of this process queued on ``worker`` (to pick the least busy queue; no I/O)."""

    @abc.abstractmethod
    def local(self, worker: str) -> SlotReport:
        """This process's share of ``worker``'s slots (metrics: the shares sum to the whole)."""

    @abc.abstractmethod
    async def report(self) -> Mapping[str, SlotReport]:
        """Every worker's slots as the store sees them (all processes together)."""

    def caller_counters(self) -> CallerCounters:
        """Where keys' and tenants' rates and concurrency are counted (``counters.py``): made by the first
        call (a plan whose callers have limits), the same object on every later one."""
        made = self._counters
        if made is None:
            made = self._counters = self._new_counters()
        return made

    def _new_counters(self) -> CallerCounters:
        """This process's counters, unless the backend has a shared store (Redis, the supervisor's)."""
        from interlock.runtime.state.counters import MemoryCounters

        return MemoryCounters()

    def shared_learning(self) -> SharedLearning | None:
        """Where replicas share what answers taught them (``runtime.learned_kept``): None without a
        shared store."""
        return None

    def share_health(self, book: SharedHealth) -> None:  # noqa: B027 (only a shared store shares circuits)
        """Publish ``book``'s endpoint circuits to the other replicas and apply theirs."""

    async def start(self) -> None:  # noqa: B027 (a backend without a store has nothing to do)
        """Connect to the store, if there is one; called once, at gateway startup."""

    async def close(self) -> None:  # noqa: B027
        """Let go of the store; held leases are the store's to reclaim."""

    @property
    def degraded(self) -> bool:
        """True while the store is unreachable and limits are per process."""
        return False
