"""The shared upstream HTTP client: a keep-alive pool per origin of lean HTTP/1.1 connections (http1.py).

It replaced aiohttp by measurement (bench/client_floor.py, docs/upstream-client.md). The runtime creates
one ``UpstreamClient`` at app startup, hands it to ``adapter_for`` and closes it at shutdown. Redirects
are never followed, no proxy settings are read from the environment, answers are asked for uncompressed
(``Accept-Encoding: identity``). TLS is the standard library's ``ssl``: the system's trusted CAs and host
name checks (``ssl.create_default_context()``) unless ``create(ssl_context=...)`` gives another.

The pool: each origin (scheme, host, port) keeps its idle connections last-in first-out, so the busy
ones stay warm and the rest age out: one idle longer than ``keepalive_s`` is closed when met, and the
oldest is checked on every request. ``max_connections`` caps open connections, all origins together:
past it a new connection waits for one to close (an idle one of any origin is closed for it).

Stale keep-alive connections: an upstream may close an idle pooled connection (Ollama's Go server
does after its idle timeout; a restarted box drops them all) while the gateway has not yet read the
close. A request sent on it fails before any answer arrives. That is not the upstream's fault, so the
request is sent once more on a fresh connection (as Go's ``http.Transport`` and urllib3 do), when:
- the failed connection came from the pool (a fresh one that fails is the upstream's failure);
- not a byte of the answer had arrived (``http1.Stale``: a connection cut inside an answer's head or
  body is ``CutShort``, never resent);
- the failure is a close, a reset or a broken pipe, never a connect error or a timeout; the body is in
  memory, so resending it is safe.
The resend takes a fresh connection, and the origin's other idle connections are closed (they are as
old as the one that failed). A second failure is reported as it is.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections import deque
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Self
from urllib.parse import urlsplit

from interlock.runtime.upstream.http1 import (
    FIRST_BYTE,
    CertificateError,
    ClientClosed,
    ConnectError,
    Connection,
    ConnectTimeout,
    DNSError,
    InvalidHeader,
    InvalidURL,
    Response,
    Stale,
    Timeout,
    TLSError,
)

if TYPE_CHECKING:
    from interlock.runtime.upstream.base import Adapter

USER_AGENT = "interlock/0.1"
_JSON = "Content-Type: application/json\r\n"


class Origin:
    """One scheme://host:port: its idle connections (most recently used last) and how to open more."""

    __slots__ = ("client", "dead", "fixed", "host", "idle", "port", "ssl")

    def __init__(self, client: UpstreamClient, host: str, port: int, tls: ssl.SSLContext | None) -> None:
        self.client = client
        self.host = host
        self.port = port
        self.ssl = tls
        self.idle: list[Connection] = []
        self.dead = 0  # connections in ``idle`` that the upstream closed meanwhile (skipped when met)
        default = 443 if tls is not None else 80
        netloc = f"[{host}]" if ":" in host else host
        authority = netloc if port == default else f"{netloc}:{port}"
        # the headers every request to this origin starts with, built once
        self.fixed = f"Host: {authority}\r\nUser-Agent: {USER_AGENT}\r\nAccept-Encoding: identity\r\n"

    def take(self, now: float) -> Connection | None:
        """An idle connection young enough to use, or None."""
        idle, keepalive_s = self.idle, self.client.keepalive_s
        if idle and now - idle[0].idle_since > keepalive_s:  # the oldest, on every request: ages out
            oldest = idle.pop(0)
            oldest.pooled = False
            oldest.abort()
        while idle:
            conn = idle.pop()
            conn.pooled = False
            if conn.closed:
                self.dead = max(0, self.dead - 1)
                continue
            if now - conn.idle_since > keepalive_s:
                conn.abort()
                continue
            return conn
        return None

    def put(self, conn: Connection) -> None:
        """A connection whose exchange is over, back in the pool (or closed, if the client is)."""
        client = self.client
        if conn.closed:
            return
        if client.closed or client.waiting:  # someone waits for a connection slot: give it up
            conn.abort()
            return
        conn.idle_since = asyncio.get_running_loop().time()
        conn.pooled = True
        self.idle.append(conn)

    def forget(self, conn: Connection) -> None:
        """An idle connection closed by the upstream: counted, and the list compacted now and then (a
        removal each would cost a scan of the list, per close, when an upstream closes them all)."""
        conn.pooled = False
        self.dead += 1
        if self.dead > 32 and self.dead * 2 > len(self.idle):
            self.idle = [c for c in self.idle if not c.closed]
            self.dead = 0

    def drop_idle(self) -> None:
        idle, self.idle = self.idle, []
        self.dead = 0
        for conn in idle:
            conn.pooled = False
            conn.abort()


class UpstreamClient:
    """Owns the pools; adapters borrow it. Build it with ``create()``; close it with ``aclose()``."""

    def __init__(
        self, *, max_connections: int, keepalive_s: float, ssl_context: ssl.SSLContext | None
    ) -> None:
        self.max_connections = max_connections
        self.keepalive_s = keepalive_s
        self.closed = False
        self._ssl = ssl_context
        self._origins: dict[tuple[str, str, int], Origin] = {}
        self._bases: dict[str, tuple[Origin, str]] = {}  # base URL -> its origin and path prefix
        self._open = 0  # connections made and not yet lost
        self._waiters: deque[asyncio.Future[None]] = deque()

    @classmethod
    def create(
        cls,
        *,
        max_connections: int = 4096,
        keepalive_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> UpstreamClient:
        """A client keeping up to ``max_connections`` connections (all origins together) open; TLS with
        ``ssl_context`` (default: the system's trusted CAs, host names checked)."""
        return cls(max_connections=max_connections, keepalive_s=keepalive_s, ssl_context=ssl_context)

    @property
    def waiting(self) -> int:
        """Requests waiting for a connection slot (``max_connections`` reached)."""
        return len(self._waiters)

    @property
    def open_connections(self) -> int:
        return self._open

    def idle_connections(self) -> int:
        return sum(1 for origin in self._origins.values() for conn in origin.idle if not conn.closed)

    async def request(
        self,
        method: str,
        base_url: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes | None,
        *,
        connect_s: float,
        first_byte_at: float,
        total_at: float,
        json: bool = True,
    ) -> Response:
        """Send ``method`` ``base_url`` + ``path``; return once the answer's headers have arrived.

        Deadlines are loop times: connecting must end within ``connect_s`` (and before
        ``first_byte_at``), the headers arrive before ``first_byte_at`` (``Response.answered()`` then
        moves the exchange on to ``total_at``). ``json``: the body is JSON (its Content-Type is sent)."""
        found = self._bases.get(base_url)
        origin, prefix = found if found is not None else self._base(base_url)
        lines = [method, " ", prefix, path, " HTTP/1.1\r\n", origin.fixed]
        for name, value in headers.items():
            if "\n" in value or "\r" in value or "\n" in name or "\r" in name:
                raise InvalidHeader("line break in a request header")
            lines += (name, ": ", value, "\r\n")
        if body is not None:
            if json:
                lines.append(_JSON)
            lines += ("Content-Length: ", str(len(body)), "\r\n")
        lines.append("\r\n")
        try:
            head = "".join(lines).encode("latin-1")
        except UnicodeEncodeError:
            raise InvalidHeader("request header not Latin-1") from None
        loop = asyncio.get_running_loop()
        conn = origin.take(loop.time())
        if conn is not None:
            try:
                return await _exchange(conn, head, body, first_byte_at, total_at)
            except Stale:
                origin.drop_idle()  # closed or reset before a byte came back: resend on a fresh one
        conn = await self._connect(origin, connect_s, first_byte_at)
        return await _exchange(conn, head, body, first_byte_at, total_at)

    def _base(self, base_url: str) -> tuple[Origin, str]:
        parts = urlsplit(base_url)
        scheme = parts.scheme.lower()
        try:
            port = parts.port
        except ValueError:
            raise InvalidURL("invalid upstream URL") from None
        if scheme not in ("http", "https") or not parts.hostname:
            raise InvalidURL("upstream URL is not http(s)")
        host = parts.hostname
        port = port or (443 if scheme == "https" else 80)
        key = (scheme, host, port)
        origin = self._origins.get(key)
        if origin is None:
            tls = None
            if scheme == "https":
                tls = self._ssl if self._ssl is not None else _default_context()
            origin = self._origins[key] = Origin(self, host, port, tls)
        prefix = parts.path.rstrip("/")
        if parts.query:
            raise InvalidURL("upstream URL has a query")
        found = self._bases[base_url] = (origin, prefix)
        return found

    async def _connect(self, origin: Origin, connect_s: float, first_byte_at: float) -> Connection:
        if self.closed:
            raise ClientClosed("client closed")
        loop = asyncio.get_running_loop()
        while self._open >= self.max_connections:
            self._close_oldest_idle()
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            if self.closed:
                raise ClientClosed("client closed")
        connect_at = loop.time() + connect_s
        self._open += 1
        try:
            async with asyncio.timeout_at(min(connect_at, first_byte_at)):
                _, conn = await loop.create_connection(
                    lambda: Connection(origin, self._lost),
                    origin.host,
                    origin.port,
                    ssl=origin.ssl,
                    server_hostname=origin.host if origin.ssl is not None else None,
                )
        except BaseException as exc:
            self._open -= 1
            self._wake_one()
            if isinstance(exc, TimeoutError):
                if connect_at <= first_byte_at:
                    raise ConnectTimeout("connect timed out") from None
                raise Timeout(FIRST_BYTE) from None
            if isinstance(exc, ssl.SSLCertVerificationError):
                raise CertificateError("TLS certificate rejected") from None
            if isinstance(exc, ssl.SSLError):
                raise TLSError("TLS handshake failed") from None
            if isinstance(exc, socket.gaierror):
                raise DNSError("DNS lookup failed") from None
            if isinstance(exc, OSError):
                raise ConnectError("connection refused or unreachable") from None
            raise
        return conn

    def _lost(self, conn: Connection) -> None:
        self._open -= 1
        if conn.pooled:
            conn.origin.forget(conn)
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _close_oldest_idle(self) -> None:
        oldest: Connection | None = None
        for origin in self._origins.values():
            if origin.idle and (oldest is None or origin.idle[0].idle_since < oldest.idle_since):
                oldest = origin.idle[0]
        if oldest is not None:
            oldest.origin.idle.remove(oldest)
            oldest.pooled = False
            oldest.abort()

    async def aclose(self) -> None:
        """Close every idle connection, and every busy one as its exchange ends; wake waiters."""
        self.closed = True
        for origin in self._origins.values():
            origin.drop_idle()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        await asyncio.sleep(0)  # let the transports report their close

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def _exchange(
    conn: Connection, head: bytes, body: bytes | None, first_byte_at: float, total_at: float
) -> Response:
    response = conn.send(head, body, first_byte_at, total_at)
    try:
        await response.head()
    except BaseException:
        response.close()
        raise
    return response


_CONTEXT: list[ssl.SSLContext] = []


def _default_context() -> ssl.SSLContext:
    """The system's trusted CAs, host names checked; built once (loading the CA store takes ms)."""
    if not _CONTEXT:
        _CONTEXT.append(ssl.create_default_context())
    return _CONTEXT[0]


def adapter_for(kind: str, client: UpstreamClient) -> Adapter:
    """The adapter for a provider kind (a row of ``interlock.kinds.KINDS``), sharing ``client``."""
    from interlock.kinds import KINDS, listed

    row = KINDS.get(kind)
    if row is None:
        raise ValueError(f"unknown upstream kind {kind!r}; expected {listed()}")
    adapter: Adapter = row.load_adapter()(client)
    return adapter
