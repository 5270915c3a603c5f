"""The checks of a candidate whose circuit is open (``recovery.py`` schedules them; its module docstring
says which is which): a provider's ``recovery_check`` -> the check. Imported by the first check, in the
probe loop, never on the request path."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from interlock.runtime.base.errors import ConnectTimeout, UpstreamError
from interlock.runtime.books.health import HealthBook
from interlock.runtime.loaded.tables import Candidate
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.upstream.exchange import probe_endpoint

PING = "ping"

Check = Callable[[Adapter, HealthBook, Candidate, float], Awaitable[bool]]


async def guarded(call: Awaitable[Any], label: str, timeout_s: float) -> UpstreamError | None:
    """Run one upstream call of a check: its failure as an UpstreamError, None when it passed."""
    try:
        await asyncio.wait_for(call, timeout_s + 1.0)
    except UpstreamError as exc:
        return exc
    except TimeoutError:  # the adapter should time out itself; this is the backstop
        return ConnectTimeout(f"check of {label} timed out")
    return None


async def _probe(adapter: Adapter, health: HealthBook, candidate: Candidate, timeout_s: float) -> bool:
    """Its endpoints' own probe (each recorded as a probe): passes when one of them passes."""
    passed = False
    for route in candidate.routes:
        label = route.endpoint.label
        error = await guarded(adapter.probe(route.endpoint, timeout_s), label, timeout_s)
        health.record_probe(label, error)
        passed = passed or error is None
    return passed


async def _request(adapter: Adapter, health: HealthBook, candidate: Candidate, timeout_s: float) -> bool:
    """A 1-token chat request to its model on its first endpoint: passes when the model answered."""
    endpoint = probe_endpoint(candidate.routes[0].endpoint, timeout_s)
    body: dict[str, Any] = {
        "model": candidate.model,
        "messages": [{"role": "user", "content": PING}],
        "max_tokens": 1,
        "stream": False,
    }
    return (
        await guarded(adapter.chat(endpoint, candidate.model, body, None), endpoint.label, timeout_s) is None
    )


CHECKS: Mapping[str, tuple[Check, bool]] = {"probe": (_probe, False), "request": (_request, True)}
"""A provider's ``recovery_check`` -> (the check, whether a pass is strong evidence: it generated)."""
