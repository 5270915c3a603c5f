"""What an OpenAI-compatible server says about its own load, and how a server kind reads it.

A ``ServerKind`` names the paths to fetch (under the server's root: its worker URL less a trailing
``/v1``) and one function from the bodies that answered to a ``ServerLoad``. Every field of a load is
optional: a server tells what it tells (llama.cpp's ``/metrics`` only with ``--metrics``, its ``/slots``
only where it is on; SGLang's ``/metrics`` only with ``--enable-metrics``), and unknown is never zero.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from interlock.runtime.fleet.signals.exposition import samples


@dataclass(frozen=True, slots=True)
class ServerLoad:
    """One reading of a server's own load; None: the server did not say."""

    running: int | None = None  # requests it is working on (all its clients', not only this gateway's)
    waiting: int | None = None  # requests it holds back: queued (vLLM, SGLang) or deferred (llama.cpp)
    slots: int | None = None  # requests it runs at once, where it says (llama.cpp's /slots)
    kv_used: float | None = None  # fraction of its KV cache in use, 0 to 1
    cached_tokens: int | None = None  # tokens held in its KV cache (llama.cpp, SGLang)
    # the window one request gets: a slot's context where the server says (llama.cpp's /slots ``n_ctx``,
    # ``--ctx-size`` split over ``--parallel``)
    window: int | None = None
    at: float = 0.0  # monotonic seconds of the reading
    # a key that changes as the server makes progress on its work (``signals/progress.py``): llama.cpp's
    # busy slots' (task, prompt tokens processed, tokens decoded); vLLM's and SGLang's token counters;
    # not compared: two readings of the same load are equal whatever their progress
    progress: tuple[int, ...] | None = field(default=None, compare=False)

    @property
    def working(self) -> bool:
        """Whether the server says it is working on something now (running or holding requests)."""
        return self.busy > 0

    @property
    def busy(self) -> int:
        """Requests in the server now, running or held back (0 for what it did not say)."""
        return (self.running or 0) + (self.waiting or 0)

    def report(self) -> dict[str, int | float | None]:
        return {
            "running": self.running,
            "waiting": self.waiting,
            "slots": self.slots,
            "kv_used": round(self.kv_used, 4) if self.kv_used is not None else None,
            "cached_tokens": self.cached_tokens,
        }


Reader = Callable[[Mapping[str, bytes]], ServerLoad]
"""``{path: body}`` of the paths that answered (at least one) -> the load; raises ValueError when what
answered is not that server's format."""


@dataclass(frozen=True, slots=True)
class ServerKind:
    """One server kind: the paths its load is read from, and the reader of their bodies."""

    name: str  # as a worker's `server:` names it (interlock.common.kinds.SERVER_KINDS)
    paths: tuple[str, ...]
    read: Reader


MAX_COUNT = float(1 << 53)
"""A count read from a server's gauges (requests, tokens): past 2^53 it says nothing true, and a sum of
finite samples can reach infinity, which ``round`` refuses with OverflowError."""


def total(values: list[float] | None) -> int | None:
    """The sum of a gauge's samples (one per engine or rank) as a count; None when absent, or when the
    sum is past ``MAX_COUNT`` either way (refused: unknown, like every bound on a server's numbers)."""
    if not values:
        return None
    summed = sum(values)
    return max(round(summed), 0) if -MAX_COUNT <= summed <= MAX_COUNT else None


def highest(values: list[float] | None) -> float | None:
    """The largest of a ratio's samples, clamped to 0..1; None when absent."""
    return None if not values else min(max(max(values), 0.0), 1.0)


@dataclass(frozen=True, slots=True)
class Gauges:
    """A ``/metrics``-only server's reader (vLLM, SGLang): which gauges hold its load. ``kv``: the KV
    cache's use under each name it had, newest first; ``absent``: the error when neither count is there."""

    running: str
    waiting: str
    kv: tuple[str, ...]
    absent: str
    cached_tokens: str | None = None
    counters: tuple[str, ...] = ()  # token counters that grow as it works (prompt, generation)

    @property
    def names(self) -> frozenset[str]:
        extra = (self.cached_tokens,) if self.cached_tokens else ()
        return frozenset((self.running, self.waiting, *self.kv, *extra, *self.counters))

    def __call__(self, bodies: Mapping[str, bytes]) -> ServerLoad:
        found = samples(bodies["/metrics"].decode("utf-8", "replace"), self.names)
        if self.running not in found and self.waiting not in found:
            raise ValueError(self.absent)
        return ServerLoad(
            running=total(found.get(self.running)),
            waiting=total(found.get(self.waiting)),
            kv_used=highest(next((found[name] for name in self.kv if found.get(name)), None)),
            cached_tokens=total(found.get(self.cached_tokens)) if self.cached_tokens else None,
            progress=_counted(found, self.counters),
        )


def _counted(found: dict[str, list[float]], counters: tuple[str, ...]) -> tuple[int, ...] | None:
    """The counters' sums as a progress key; None when the server has none of them."""
    sums = tuple(total(found.get(name)) for name in counters)
    return None if all(value is None for value in sums) else tuple(value or 0 for value in sums)
