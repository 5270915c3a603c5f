"""What the metadata and signal fetchers share: the facts table they fill, the adapter they ask through,
and one fetch from a worker, bounded in time and counted (``interlock_metadata_fetches_total``).

Both run in the probe loop's rounds, outside the request path; a failed fetch is counted by its error
class (``timeout`` when even the extra second ran out), logged at debug, and handed back to the fetcher,
which decides what the worker's facts become.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from interlock.runtime.base.clock import Clock
from interlock.runtime.base.errors import UpstreamError
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.fleet.live_facts import LiveFacts
from interlock.runtime.wire.base import Endpoint

A = TypeVar("A")  # the adapter of the workers' kind
T = TypeVar("T")

Failed = UpstreamError | TimeoutError  # what a fetch met instead of an answer


@dataclass(eq=False)
class Fetcher(Generic[A]):
    """Fills ``facts`` from workers through ``adapter()`` (None: the plan has no provider of that kind)."""

    log: ClassVar[logging.Logger]
    name: ClassVar[str]  # what its log lines start with

    facts: LiveFacts
    adapter: Callable[[], A | None]
    metrics: Metrics
    clock: Clock = time.monotonic

    async def fetched(
        self, call: Awaitable[T], endpoint: Endpoint, path: str, timeout_s: float, shown: str = ""
    ) -> T | Failed:
        """``call``'s answer (given ``timeout_s`` and a second more), or the failure it met instead;
        ``shown``: what the log line adds after the path (a model's name)."""
        try:
            answer = await asyncio.wait_for(call, timeout_s + 1.0)
        except (UpstreamError, TimeoutError) as exc:
            result = exc.error_class if isinstance(exc, UpstreamError) else "timeout"
            self.metrics.metadata_fetches.labels(endpoint.label, path, result).inc()
            self.log.debug("%s: %s %s%s failed (%s)", self.name, endpoint.label, path, shown, result)
            return exc
        self.metrics.metadata_fetches.labels(endpoint.label, path, "ok").inc()
        return answer
