"""How a server kind reads what an OpenAI-compatible server says about its own load (a ``ServerLoad``,
kept in the facts table: ``books/facts.py``).

A ``ServerKind`` names the paths to fetch (under the server's root: its worker URL less a trailing
``/v1``) and one function from the bodies that answered to a ``ServerLoad``. Every field of a load is
optional: a server tells what it tells (llama.cpp's ``/metrics`` only with ``--metrics``, its ``/slots``
only where it is on; SGLang's ``/metrics`` only with ``--enable-metrics``), and unknown is never zero.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from interlock.runtime.books.facts import ServerLoad
from interlock.runtime.fleet.signals.exposition import samples

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
