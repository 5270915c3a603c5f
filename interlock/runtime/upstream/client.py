"""The shared upstream HTTP client: one aiohttp session with a keep-alive pool, for every adapter.

aiohttp was chosen by measurement (bench/upstream_client.py, docs/upstream-client.md). The
runtime creates one ``UpstreamClient`` at app startup, hands it to ``adapter_for`` and closes it at
shutdown. Redirects are never followed and no proxy settings are read from the environment.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import TYPE_CHECKING, Self

import aiohttp

if TYPE_CHECKING:
    from interlock.runtime.upstream.base import Adapter

USER_AGENT = "interlock/0.1"
DRAIN_MAX_S = 1.0  # how long a finished stream's leftovers may take before the connection is dropped
DRAIN_MAX_BYTES = 64 * 1024


class UpstreamClient:
    """Owns the aiohttp session; adapters borrow it. Build it with ``create()`` inside the running loop."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._drains: set[asyncio.Task[None]] = set()

    @classmethod
    def create(cls, *, max_connections: int = 4096, keepalive_s: float = 30.0) -> UpstreamClient:
        """A client whose pool keeps up to ``max_connections`` connections (all hosts together) alive."""
        connector = aiohttp.TCPConnector(
            limit=max_connections,
            limit_per_host=0,
            keepalive_timeout=keepalive_s,
            ttl_dns_cache=300,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None),
            headers={"User-Agent": USER_AGENT},
            raise_for_status=False,
            trust_env=False,
        )
        return cls(session)

    def connect_timeout(self, connect_s: float) -> aiohttp.ClientTimeout:
        """aiohttp's own timeout covers connecting only; first-byte and total deadlines are ours."""
        timeout = self._timeouts.get(connect_s)
        if timeout is None:
            timeout = self._timeouts[connect_s] = aiohttp.ClientTimeout(total=None, sock_connect=connect_s)
        return timeout

    def drain_later(self, response: aiohttp.ClientResponse) -> None:
        """Read what is left of a finished stream (its terminating chunk, usually in flight) in the
        background, then return the connection to the pool; the caller does not wait for it."""
        task = asyncio.get_running_loop().create_task(_drain(response))
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)

    async def aclose(self) -> None:
        for task in list(self._drains):
            task.cancel()
        await asyncio.gather(*self._drains, return_exceptions=True)
        await self.session.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def _drain(response: aiohttp.ClientResponse) -> None:
    left = DRAIN_MAX_BYTES
    try:
        async with asyncio.timeout(DRAIN_MAX_S):
            while left > 0:
                data = await response.content.readany()
                if not data:
                    response.release()
                    return
                left -= len(data)
    except (TimeoutError, aiohttp.ClientError, OSError):
        pass
    finally:
        response.close()  # a no-op once released


def adapter_for(kind: str, client: UpstreamClient) -> Adapter:
    """The adapter for a provider kind (a row of ``interlock.kinds.KINDS``), sharing ``client``."""
    from interlock.kinds import KINDS, listed

    row = KINDS.get(kind)
    if row is None:
        raise ValueError(f"unknown upstream kind {kind!r}; expected {listed()}")
    adapter: Adapter = row.load_adapter()(client)
    return adapter
