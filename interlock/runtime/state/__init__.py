"""Where the live limits are kept: one small async seam, one module per backend, one table of them.

The request path asks a ``SlotBackend`` for a slot on a worker (``acquire``) and gives it back with
``Lease.release``; everything else (the bounded FIFO queue, its timeout, ``Retry-After``) is the backend's.
The backend is chosen once, at start, from a state URL:

- ``memory:`` (the default for ``--workers 1``): the slot table of this process (``memory.py``);
- ``unix:PATH`` (what ``--workers N`` uses): the supervisor process owns the host's queue, each worker
  takes free slots in a shared file beside its socket (``embedded.py``, ``shared.py``: no round trip)
  and queues over the socket; a worker that dies gives back every slot it held (its connection ends,
  the kernel drops its row's lock);
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

from collections.abc import Callable, Mapping

from interlock.runtime.state.base import SlotBackend


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
