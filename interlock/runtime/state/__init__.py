"""Where the live limits are kept: one small async seam, one module per backend, one table of them.

The request path asks a ``SlotBackend`` for a slot on a worker (``acquire``) and gives it back with
``Lease.release``; everything else (the bounded FIFO queue, its timeout, ``Retry-After``) is the backend's.
The backend is chosen once, at start, from a state URL:

- ``memory:`` (the default for ``--workers 1``): the slot table of this process (``memory.py``);
- ``unix:PATH`` (what ``--workers N`` uses): the supervisor process owns the one table of the host and
  each worker leases over a Unix socket (``embedded.py``); a worker that dies loses its connection and
  with it every slot it held;
- ``redis://HOST:PORT/DB`` (``--state-url``, several replicas): slots, queues and endpoint circuits in
  one Redis or Valkey (``redis.py``), leases with a TTL renewed while a request runs.

Each backend also says where the caller limits (keys' and tenants' requests/min, tokens/min and
concurrency) are counted: ``caller_counters`` gives this process's ``MemoryCounters``, the supervisor's
table over the same socket (``EmbeddedCounters``) or Redis (``RedisCounters``), one row per backend.

Why the boundary: the router and the guards must not care whether a slot is a dictionary entry or a
round trip, and a backend must not know about plans beyond ``WorkerLimits``. A backend that loses its
store falls back to per-process limits (``state_degraded``), logs it loudly and never hangs a request.

Exceptions: ``SlotUnavailable`` (429 + ``Retry-After``) is the only one a backend lets out of ``acquire``;
``StateUnreachable`` stays inside the backends (it is what makes them fall back).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from interlock.runtime.plan import WorkerLimits

if TYPE_CHECKING:
    from interlock.runtime.health import HealthBook
    from interlock.runtime.state.counters import CallerCounters


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


class SlotBackend(abc.ABC):
    """Slots (per worker and per model) with the bounded FIFO queue; one instance per gateway process."""

    scope: str = "process"  # what the limits span: "process" or "host"
    fallbacks: int = 0  # times the store was lost or unreachable (each starts per-process limits)

    @abc.abstractmethod
    def configure(self, workers: Mapping[str, WorkerLimits]) -> None:
        """The current plan's bounds; known workers keep their held slots."""

    @abc.abstractmethod
    async def acquire(self, worker: str, model: str, limit: int, *, wait: bool) -> Lease | None:
        """A slot now; else (``wait``) after queueing, ``SlotUnavailable`` past the queue; else None."""

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
        """Where keys' and tenants' rates and concurrency are counted (``counters.py``): this process,
        unless the backend has a shared store (Redis). Called once, when the gateway is built."""
        from interlock.runtime.state.counters import MemoryCounters

        return MemoryCounters()

    def share_health(self, book: HealthBook) -> None:  # noqa: B027 (only a shared store shares circuits)
        """Publish ``book``'s endpoint circuits to the other replicas and apply theirs."""

    async def start(self) -> None:  # noqa: B027 (a backend without a store has nothing to do)
        """Connect to the store, if there is one; called once, at gateway startup."""

    async def close(self) -> None:  # noqa: B027
        """Let go of the store; held leases are the store's to reclaim."""

    @property
    def degraded(self) -> bool:
        """True while the store is unreachable and limits are per process."""
        return False


def open_backend(url: str | None) -> SlotBackend:
    """The backend for a state URL (``None``: this process's memory), by the table below."""
    scheme, _, rest = (url or "memory:").partition(":")
    factory = BACKENDS.get(scheme)
    if factory is None:
        known = ", ".join(f"{s}:" for s in BACKENDS)
        raise ValueError(f"unknown state backend {scheme + ':'!r} (known: {known})")
    return factory(rest.removeprefix("//"))


def _memory(rest: str) -> SlotBackend:
    from interlock.runtime.state.memory import MemorySlots

    return MemorySlots()


def _unix(rest: str) -> SlotBackend:
    from interlock.runtime.state.embedded import EmbeddedSlots

    return EmbeddedSlots(rest)


def _redis(scheme: str) -> Callable[[str], SlotBackend]:
    def open_redis(rest: str) -> SlotBackend:
        try:
            from interlock.runtime.state.redis import RedisSlots

            return RedisSlots(f"{scheme}://{rest}")
        except ImportError:
            raise ValueError(
                f"{scheme}: state needs the redis client: pip install 'interlock[redis]'"
            ) from None

    return open_redis


BACKENDS: Mapping[str, Callable[[str], SlotBackend]] = {
    "memory": _memory,
    "unix": _unix,
    "redis": _redis("redis"),
    "rediss": _redis("rediss"),
}
