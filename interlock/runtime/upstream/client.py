"""The shared upstream HTTP client: one aiohttp session with a keep-alive pool, for every adapter.

aiohttp was chosen by measurement (bench/upstream_client.py, docs/upstream-client.md). The
runtime creates one ``UpstreamClient`` at app startup, hands it to ``adapter_for`` and closes it at
shutdown. Redirects are never followed and no proxy settings are read from the environment.

Stale keep-alive connections: an upstream may close an idle pooled connection (Ollama's Go server
does after its idle timeout; a restarted box drops them all) while the gateway has not yet read the
close. A request sent on it fails before any answer arrives. That is not the upstream's fault, so the
request is sent once more on a fresh connection (as Go's ``http.Transport`` and urllib3 do), when:
- the failed connection came from the pool (a fresh one that fails is the upstream's failure);
- no answer headers had been parsed (the failure is raised while sending or awaiting the status line;
  a ``ServerDisconnectedError`` holding a partly parsed answer is not retried; a reset that cuts a
  status line short cannot be told from one before it, and is resent);
- the failure is a disconnect, a reset or a broken pipe (``RETRYABLE``), never a connect error or a
  timeout; the body is in memory, so resending it is safe.
The resend takes a fresh connection: idle pooled connections to that host met on the way are dropped
(they are as old as the one that failed). A second failure is reported as it is.
``_create_connection`` is aiohttp's private hook; tests/runtime/upstream/test_stale_connections.py fails if an
aiohttp upgrade stops calling it (fresh connections would then look pooled).
"""

from __future__ import annotations

import asyncio
import errno
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.http_parser import RawResponseMessage

if TYPE_CHECKING:
    from interlock.runtime.upstream.base import Adapter

USER_AGENT = "interlock/0.1"
DRAIN_MAX_S = 1.0  # how long a finished stream's leftovers may take before the connection is dropped
DRAIN_MAX_BYTES = 64 * 1024


def is_stale(exc: aiohttp.ClientError) -> bool:
    """A failure that a connection closed by the upstream while idle in our pool produces."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return not isinstance(exc.message, RawResponseMessage)  # no part of an answer was parsed
    if isinstance(exc, aiohttp.ClientConnectorError):
        return False  # connecting: never a pooled connection
    if isinstance(exc, aiohttp.ClientConnectionResetError):
        return True  # written to a transport already closing
    return isinstance(exc, aiohttp.ClientOSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE)


RETRYABLE = (aiohttp.ServerDisconnectedError, aiohttp.ClientConnectionResetError, aiohttp.ClientOSError)


class PoolConnector(aiohttp.TCPConnector):
    """A TCPConnector that tells which requests went out on a pooled (reused) connection.

    Fresh connections are marked when created (``_create_connection``, the one aiohttp hook that only
    new connections pass through) and unmarked when ``connect`` hands them out; a request that gets an
    unmarked one is noted in ``reused`` until the session middleware (``resend_stale``) is done with it.
    A request in ``fresh_only`` (a resend) never gets a pooled connection: idle ones are dropped.
    Plain sets, not weak ones: an entry lives for one ``connect`` or one request, and costs no weakref.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fresh: set[ResponseHandler] = set()
        self.reused: set[aiohttp.ClientRequest] = set()
        self.fresh_only: set[aiohttp.ClientRequest] = set()

    async def _create_connection(self, *args: Any, **kwargs: Any) -> ResponseHandler:
        proto: ResponseHandler = await super()._create_connection(*args, **kwargs)
        self._fresh.add(proto)
        return proto

    async def connect(
        self,
        req: aiohttp.ClientRequest,
        traces: list[Any],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 - aiohttp's signature, called by keyword
    ) -> aiohttp.connector.Connection:
        while True:
            conn = await super().connect(req, traces, timeout)
            proto = conn.protocol
            if proto in self._fresh:
                self._fresh.discard(proto)  # its next use is a reuse
                self.reused.discard(req)
                return conn
            if req not in self.fresh_only:
                self.reused.add(req)
                return conn
            conn.close()  # a resend: drop the idle ones, as old as the one that failed


def _resend_stale(connector: PoolConnector) -> aiohttp.ClientMiddlewareType:
    """The session middleware that sends a request once more when a stale pooled connection failed it."""
    reused, fresh_only = connector.reused, connector.fresh_only

    async def resend_stale(
        req: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        try:
            return await handler(req)
        except RETRYABLE as exc:
            if not (req in reused and is_stale(exc)):
                raise
        finally:
            reused.discard(req)
        fresh_only.add(req)
        try:
            return await handler(req)
        finally:
            fresh_only.discard(req)
            reused.discard(req)

    return resend_stale


class UpstreamClient:
    """Owns the aiohttp session; adapters borrow it. Build it with ``create()`` inside the running loop."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._drains: set[asyncio.Task[None]] = set()

    @classmethod
    def create(cls, *, max_connections: int = 4096, keepalive_s: float = 30.0) -> UpstreamClient:
        """A client whose pool keeps up to ``max_connections`` connections (all hosts together) alive."""
        connector = PoolConnector(
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
            middlewares=(_resend_stale(connector),),
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
