"""Pre-candidate guards: the checks the router runs, in order, before it calls a candidate.

A guard looks at one candidate and the request and either lets it through (possibly narrowing the routes
it may use, or settling on one and holding a slot there) or names a short reason to skip it. Skipping
costs no network time. Guards that hold a resource (a slot) go last, so a later skip never strands one.
In order: ``CapabilityGuard`` and ``ContextGuard`` (what the request needs against what the candidate
can do: a skip here is a *misfit*, recorded in the request's ``Preflight``), ``HealthGuard`` (circuits,
endpoint health), ``SlotGuard`` (worker choice, slot admission), then ``OllamaOptionsGuard``, which
never skips and only settles what the chosen Ollama worker is sent (``num_ctx``, ``think``).
A guard may also answer ``DEFER``: the router comes back to the candidate after the rest of the chain
(the context guard's, for a candidate the request fits only with a lowered output limit or by its
server's own count).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from interlock.runtime.guards.preflight import Preflight
from interlock.runtime.state.base import Lease
from interlock.runtime.tables import Candidate, Route

DEFER = "defer"  # a guard's answer: try this candidate again after the rest of the chain (not a skip)


@dataclass(slots=True)
class Admission:
    """What the guards settled for one candidate of one request; ``async with`` it to own its slot.

    The router enters it before the guards run and leaves it once the call (and, for a stream, the
    writing of it) is over, however that ends: the one place a held slot is given back.
    """

    candidate: Candidate
    routes: tuple[Route, ...]  # still eligible; guards narrow it
    preflight: Preflight | None = None  # the request's needs and findings (one per request)
    route: Route | None = None  # the one to call, once chosen
    body: Mapping[str, Any] | None = None  # what this candidate is sent, when not the caller's body
    lease: Lease | None = None  # held slot, given back when the ``async with`` block ends
    queued_s: float = 0.0  # time spent waiting for a slot
    spill: float | None = None  # worker full: skip to the next candidate when the expected wait (s)
    # exceeds this (0: at once); None: queue
    has_next: bool = False  # a later candidate exists (a worker's own `fallback` needs one)
    ceiling: int | None = None  # the output limit this candidate is sent, lowered to fit its window

    async def __aenter__(self) -> Admission:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        lease, self.lease = self.lease, None
        if lease is not None:
            await lease.release()


class Guard(abc.ABC):
    """One check before a candidate is called."""

    @abc.abstractmethod
    async def admit(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        """None to go on; ``DEFER`` to be asked again after the rest of the chain; else a short,
        stable reason to skip the candidate (a metric label)."""
