"""The own transport: a keep-alive pool per provider of lean HTTP/1.1 connections (http1.py).

It replaced aiohttp by measurement (bench/client_floor.py, docs/upstream-client.md). It is the default
row of ``net/transport.py::TRANSPORTS``: the runtime creates one ``UpstreamClient`` at app startup,
hands it to every adapter (``upstream/base.py::adapter_for``), which calls only its ``send``, and closes
it at shutdown. Redirects
are never followed, no proxy settings are read from the environment, answers are asked for uncompressed
(``Accept-Encoding: identity``). TLS is the standard library's ``ssl``: the system's trusted CAs and host
name checks (``ssl.create_default_context()``) unless ``create(ssl_context=...)`` gives another.

The pools: one per provider (``pool``: the endpoint's label, one per provider or worker, and with it one
credential) and origin (scheme, host, port); two providers behind one host:port never share a
connection, so nothing one of them sends can reach the other's callers. Each keeps its idle connections
last-in first-out, so the busy ones stay warm and the rest age out: one idle longer than ``keepalive_s``
is closed when met, and the oldest is checked on every request. ``max_connections`` caps open
connections, all pools together: past it a new connection waits for one to close (an idle one of any
pool is closed for it).

Reuse: a connection goes back to its pool only when its exchange ended cleanly (the whole answer read,
or drained, keep-alive allowed); a failed, cut, abandoned or timed-out exchange drops it. Before reuse it
is checked for anything unread (``Connection.unread``: bytes, a close or a reset in the kernel's buffer
that the loop has not handed over yet); one that shows anything is dropped, and bytes arriving while it
sits idle drop it at once (http1.py). What no HTTP/1.1 client can see: bytes still on the wire when the
next request is written are read as its answer (docs/upstream-client.md, "One answer per request"); so
a provider caught sending bytes nobody asked for (``Pool.strayed``) has its connections used for one
exchange each, for ``STRAY_COOLDOWN_S``.

No replay of a written request: a request is sent again, once, on a fresh connection only when not a
byte of it went out (``http1.NotSent``: the connection was found closed before the write, or the write
itself failed at once). A connection closed or reset after the write (the upstream may have read the
request, and billed it) is reported as it is, never resent: Go's ``http.Transport`` does the same for
a request that is not idempotent. Resends are counted (``interlock_upstream_resends_total``). A POST
to a kind that says so (``interlock.common.kinds``: ``idempotency_key``) carries an ``Idempotency-Key``: a
prefix drawn at random per pool and the pool's request count, the same bytes on a resend.
"""

from __future__ import annotations

import asyncio
import secrets
import select
import socket
import ssl
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

from interlock.common.kinds import KINDS
from interlock.runtime.net.http1 import Connection, Response
from interlock.runtime.net.http_errors import (
    FIRST_BYTE,
    CertificateError,
    ClientClosed,
    ConnectError,
    ConnectTimeout,
    DNSError,
    InvalidHeader,
    InvalidURL,
    NotSent,
    Timeout,
    TLSError,
)
from interlock.runtime.net.transport import Counter, Origin, Request
from interlock.runtime.wire.base import header_lines

USER_AGENT = "interlock/0.1"
_JSON = b"Content-Type: application/json\r\n"
_MAX_HEADS = 4096  # request lines kept (label, base URL, method, path); past it, built per request
STRAY_COOLDOWN_S = 300.0
"""How long a provider caught sending bytes nobody asked for gets a fresh connection per exchange."""


class Pool:
    """One provider's connections to one scheme://host:port: the idle ones (most recently used last)
    and how to open more."""

    __slots__ = (
        "client",
        "counted",
        "dead",
        "fixed",
        "host",
        "idle",
        "key",
        "label",
        "port",
        "resent",
        "reuse_off_until",
        "sent",
        "ssl",
    )

    def __init__(
        self,
        client: UpstreamClient,
        label: str,
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        idempotency_key: bool,
    ) -> None:
        self.client = client
        self.label = label
        self.host = host
        self.port = port
        self.ssl = tls
        self.idle: list[Connection] = []
        self.dead = 0  # connections in ``idle`` that the upstream closed meanwhile (skipped when met)
        self.resent = 0  # requests sent again (not a byte had gone out on the first connection)
        self.reuse_off_until = 0.0  # loop time: until then a connection serves one exchange (``strayed``)
        self.counted = client.count_resends(label)  # and the gateway's counter of them, if given
        # Idempotency-Key: a random prefix of this pool's own (nothing of a credential, nothing shared
        # with another provider's pool) and a count of its POSTs; None for a kind that does not send it
        self.key = f"{secrets.token_hex(8)}-".encode() if idempotency_key else None
        self.sent = 0
        default = 443 if tls is not None else 80
        netloc = f"[{host}]" if ":" in host else host
        authority = netloc if port == default else f"{netloc}:{port}"
        # the headers every request to this origin starts with, built once
        self.fixed = f"Host: {authority}\r\nUser-Agent: {USER_AGENT}\r\nAccept-Encoding: identity\r\n"

    def take(self, now: float, poller: select.poll) -> Connection | None:
        """An idle connection young enough to use with nothing unread on it, or None (always None while
        this provider's connections are not reused)."""
        idle, keepalive_s = self.idle, self.client.keepalive_s
        if now < self.reuse_off_until:
            return None
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
            if now - conn.idle_since > keepalive_s or conn.unread(poller):
                conn.abort()  # aged out; or a close, a reset or bytes nobody asked for wait on it
                continue
            return conn
        return None

    def put(self, conn: Connection) -> None:
        """A connection whose exchange is over, back in the pool (or closed, if the client is)."""
        client = self.client
        if conn.closed:
            return
        now = conn.loop.time()
        if client.closed or client._waiters or now < self.reuse_off_until:  # (a slot waited for; strays)
            conn.abort()
            return
        conn.idle_since = now
        conn.pooled = True
        self.idle.append(conn)

    def strayed(self) -> None:
        """The upstream sent bytes nobody asked for on one of these connections. HTTP/1.1 cannot tell
        such bytes still on the wire from the next request's answer, so for ``STRAY_COOLDOWN_S`` each
        connection serves one exchange and is closed (the idle ones are closed now): such a provider
        costs at most the one answer it was caught on, not one in every few. Counted and said (the
        client's ``on_stray``: the metric and ``/v1/health``)."""
        client = self.client
        self.reuse_off_until = client.time() + STRAY_COOLDOWN_S
        self.drop_idle()
        if client.on_stray is not None:
            client.on_stray(self.label, STRAY_COOLDOWN_S)

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
        self,
        *,
        max_connections: int,
        keepalive_s: float,
        ssl_context: ssl.SSLContext | None,
        resends: Callable[[str], Counter] | None,
        loop: asyncio.AbstractEventLoop | None = None,
        on_stray: Callable[[str, float], None] | None = None,
    ) -> None:
        self.loop = loop  # the loop it was made on (its connections are that loop's), None made outside one
        self.max_connections = max_connections
        self.keepalive_s = keepalive_s
        self.closed = False
        self._ssl = ssl_context
        self._resends = resends
        self.on_stray = on_stray  # (a pool's label, seconds its connections are not reused)
        self._pools: dict[tuple[str, str, int, str], Pool] = {}  # (scheme, host, port, label) -> pool
        self._bases: dict[str, dict[str, tuple[Pool, str]]] = {}  # label -> base URL -> pool, path prefix
        # (label, URL, method, path) -> the pool, and the request line with the origin's fixed headers:
        # never the encoded headers (``Origin.lines``: a credential), joined to it per request
        self._heads: dict[tuple[str, str, str, str], tuple[Pool, bytes]] = {}
        self._open = 0  # connections made and not yet lost
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._poller = select.poll()  # ``Connection.unread``: one fd registered at a time, for one call

    @classmethod
    def create(
        cls,
        *,
        max_connections: int = 4096,
        keepalive_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        resends: Callable[[str], Counter] | None = None,
        on_stray: Callable[[str, float], None] | None = None,
    ) -> UpstreamClient:
        """A client keeping up to ``max_connections`` connections (all pools together) open; TLS with
        ``ssl_context`` (default: the system's trusted CAs, host names checked); ``resends``: a pool's
        label -> the counter of its resends (the gateway's ``interlock_upstream_resends_total``);
        ``on_stray``: told a pool's label and for how long its connections are not reused, each time its
        upstream is caught sending bytes nobody asked for."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        return cls(
            max_connections=max_connections,
            keepalive_s=keepalive_s,
            ssl_context=ssl_context,
            resends=resends,
            loop=loop,
            on_stray=on_stray,
        )

    def time(self) -> float:
        """The loop's time, read without ``asyncio.get_running_loop`` (a ``getpid`` system call on 3.11)
        when the client was made on the running loop."""
        loop = self.loop
        return (loop if loop is not None else asyncio.get_running_loop()).time()

    def count_resends(self, label: str) -> Counter | None:
        """The gateway's counter of a pool's resends (its metrics' child), or None when none was given."""
        return self._resends(label) if self._resends is not None else None

    def resent(self, label: str) -> int:
        """Resends of the pool ``label``, all its origins together, as its pools counted them."""
        return sum(pool.resent for key, pool in self._pools.items() if key[3] == label)

    @property
    def waiting(self) -> int:
        """Requests waiting for a connection slot (``max_connections`` reached)."""
        return len(self._waiters)

    @property
    def open_connections(self) -> int:
        return self._open

    def idle_connections(self) -> int:
        return sum(1 for pool in self._pools.values() for conn in pool.idle if not conn.closed)

    async def send(self, request: Request) -> Response:
        """Send ``request`` (net/transport.py says what each field asks); return once the answer's
        headers have arrived. Raises the ``net/http_errors.py`` tree only."""
        origin, method, path, body = request.origin, request.method, request.path, request.body
        first_byte_at, lines = request.first_byte_at, origin.lines
        if lines is None:  # a header the plan could not encode: refused by name, nothing sent
            raise InvalidHeader("a request header holds a line break or is not Latin-1")
        found = self._heads.get((origin.label, origin.url, method, path))
        target, start = found if found is not None else self._head(origin, method, path)
        extra = request.headers
        more = b""
        if extra:
            encoded = header_lines(extra)
            if encoded is None:
                raise InvalidHeader("a request header holds a line break or is not Latin-1")
            more = encoded
        if body is None:
            head = b"%b%b%b\r\n" % (start, lines, more)
        elif target.key is None:
            head = b"%b%b%b%bContent-Length: %d\r\n\r\n" % (start, lines, more, _JSON, len(body))
        else:
            target.sent = sent = target.sent + 1
            head = b"%b%b%b%bIdempotency-Key: %b%d\r\nContent-Length: %d\r\n\r\n" % (
                start,
                lines,
                more,
                _JSON,
                target.key,
                sent,
                len(body),
            )
        now = request.now
        conn = target.take(self.time() if now is None else now, self._poller)
        if conn is None:
            conn = await self._connect(target, origin.connect_s, first_byte_at)
        resend = True
        while True:
            response = conn.send(head, body, first_byte_at, request.total_at, origin.patience)
            try:
                await response.head()
                return response
            except NotSent:
                response.close()
                if not resend:
                    raise
            except BaseException:
                response.close()
                raise
            resend = False
            target.resent += 1  # not a byte went out: once more, on a fresh connection
            if target.counted is not None:
                target.counted.inc()
            conn = await self._connect(target, origin.connect_s, first_byte_at)

    def _head(self, origin: Origin, method: str, path: str) -> tuple[Pool, bytes]:
        """The pool and the request's first lines (request line, the origin's fixed headers) for one
        method and path of one provider's base URL, built once; its encoded headers follow per request
        (they hold its credential: not kept here, neither in a key nor in a value)."""
        label, base_url = origin.label, origin.url
        urls = self._bases.get(label)
        found = urls.get(base_url) if urls is not None else None
        target, prefix = found if found is not None else self._base(base_url, label, origin.kind)
        try:
            line = f"{method} {prefix}{path} HTTP/1.1\r\n{target.fixed}".encode("latin-1")
        except UnicodeEncodeError:
            raise InvalidHeader("a request header holds a line break or is not Latin-1") from None
        if len(self._heads) < _MAX_HEADS:  # (paths are the adapters' own: a few per provider)
            self._heads[label, base_url, method, path] = (target, line)
        return target, line

    def _base(self, base_url: str, label: str, kind: str | None) -> tuple[Pool, str]:
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
        key = (scheme, host, port, label)
        pool = self._pools.get(key)
        if pool is None:
            tls = None
            if scheme == "https":
                tls = self._ssl if self._ssl is not None else _default_context()
            row = KINDS.get(kind) if kind is not None else None
            idempotency_key = row is not None and row.idempotency_key
            pool = self._pools[key] = Pool(self, label, host, port, tls, idempotency_key)
        prefix = parts.path.rstrip("/")
        if parts.query:
            raise InvalidURL("upstream URL has a query")
        found = self._bases.setdefault(label, {})[base_url] = (pool, prefix)
        return found

    async def _connect(self, pool: Pool, connect_s: float, first_byte_at: float) -> Connection:
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
                    lambda: Connection(pool, self._lost, loop),
                    pool.host,
                    pool.port,
                    ssl=pool.ssl,
                    server_hostname=pool.host if pool.ssl is not None else None,
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
        for pool in self._pools.values():
            if pool.idle and (oldest is None or pool.idle[0].idle_since < oldest.idle_since):
                oldest = pool.idle[0]
        if oldest is not None:
            oldest.origin.idle.remove(oldest)
            oldest.pooled = False
            oldest.abort()

    async def aclose(self) -> None:
        """Close every idle connection, and every busy one as its exchange ends; wake waiters."""
        self.closed = True
        for pool in self._pools.values():
            pool.drop_idle()
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


_CONTEXT: list[ssl.SSLContext] = []


def _default_context() -> ssl.SSLContext:
    """The system's trusted CAs, host names checked; built once (loading the CA store takes ms)."""
    if not _CONTEXT:
        _CONTEXT.append(ssl.create_default_context())
    return _CONTEXT[0]
