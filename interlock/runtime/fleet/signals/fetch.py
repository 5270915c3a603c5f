"""The signal fetcher: each probe round, every OpenAI-compatible worker that names its ``server`` is asked
for its own load (``SERVERS[server].paths``, concurrently), outside the request path.

A path that fails (off on that server: 404, 501; refused; timed out) is counted in
``interlock_metadata_fetches_total`` and left out; the bodies that answered are read by the server kind.
When none answered, or what answered is not that server's format, the worker's load becomes unknown
(``LiveFacts.put_load(label, None)``) rather than keeping an old reading. Workers no longer read (a
reload) are forgotten at the end of the round.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from interlock.runtime.fleet.fetcher import Failed, Fetcher
from interlock.runtime.fleet.signals import SERVERS
from interlock.runtime.fleet.signals.base import ServerKind
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.upstream.openai import OpenAIAdapter
from interlock.runtime.wire.base import Endpoint

log = logging.getLogger("interlock.signals")


class SignalFetcher(Fetcher[OpenAIAdapter]):
    """Fills the ``LiveFacts``' load table from every OpenAI-compatible worker with a ``server``."""

    log = log
    name = "signals"

    def servers(self, plan: RuntimePlan) -> list[tuple[Endpoint, ServerKind]]:
        """Every endpoint of the plan whose worker names a server kind, with that kind."""
        found: list[tuple[Endpoint, ServerKind]] = []
        for provider in plan.providers.values():
            for endpoint, worker in zip(provider.endpoints, provider.workers, strict=True):
                limits = plan.workers.get(worker) if worker is not None else None
                kind = SERVERS.get(limits.server) if limits is not None and limits.server else None
                if kind is not None:
                    found.append((endpoint, kind))
        return found

    async def refresh(self, plan: RuntimePlan) -> None:
        """One round over every such worker."""
        servers = self.servers(plan)
        health = plan.health  # the longest between two readings: a round, its jitter, its timeout
        self.facts.progress.every_s = health.probe_interval_s * 1.1 + health.probe_timeout_s
        adapter = self.adapter()
        if adapter is not None and servers:
            timeout_s = plan.health.probe_timeout_s
            await asyncio.gather(*(self._server(adapter, e, kind, timeout_s) for e, kind in servers))
        self.facts.keep_loads(frozenset(endpoint.label for endpoint, _ in servers))

    async def _server(
        self, adapter: OpenAIAdapter, endpoint: Endpoint, kind: ServerKind, timeout_s: float
    ) -> None:
        now = self.clock()
        bodies = await asyncio.gather(*(self._fetch(adapter, endpoint, p, timeout_s) for p in kind.paths))
        answered = {path: body for path, body in zip(kind.paths, bodies, strict=True) if body is not None}
        load = None
        if answered:
            try:
                load = dataclasses.replace(kind.read(answered), at=now)
            except ValueError as exc:  # orjson's JSONDecodeError is a ValueError too
                log.debug("signals: %s is not a %s server's answer (%s)", endpoint.label, kind.name, exc)
        self.facts.put_load(endpoint.label, load)

    async def _fetch(
        self, adapter: OpenAIAdapter, endpoint: Endpoint, path: str, timeout_s: float
    ) -> bytes | None:
        body = await self.fetched(adapter.signal(endpoint, path, timeout_s), endpoint, path, timeout_s)
        return None if isinstance(body, Failed) else body
