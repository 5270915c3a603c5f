"""Client connections: a header-read timeout, a body-read idle timeout and a cap on open connections.

uvicorn alone never times out a connection that sends nothing, half its headers or part of a body
(its keep-alive timer starts only after a first answer), and it has no cap that frees a file
descriptor: 20,000 idle sockets exhausted the process. This module is the boundary where the gateway
takes that over, as a subclass of uvicorn's httptools protocol (one instance per connection):

- waiting for a request's headers (from connecting, or from the end of the previous answer) is
  bounded by ``server.header_timeout``: past it the connection is closed, with a 408 when part of a
  request had arrived;
- a body that stops arriving for ``server.body_timeout`` closes the connection the same way;
- at ``server.max_connections`` open connections, a new one closes the oldest *idle* one (no request
  in progress: waiting for headers, or a keep-alive pause), so a flood of idle sockets cannot lock
  out ``/healthz`` or a real client; when none is idle, the new connection gets a 503: written at once,
  then the request the client sends is read and dropped until it closes (or ``LINGER_S`` passes), so
  the client reads the 503 instead of a reset (a socket closed with unread data sends an RST);
- a WebSocket upgrade is refused with a 400 (this gateway speaks plain HTTP), never a 500;
- a streamed answer's body can be written straight to the transport (``StreamBody``, offered to the app
  as the ASGI scope extension ``interlock.stream_body``): one framed write per piece, with uvicorn's own
  flow control, instead of a message dict and a coroutine through ASGI ``send`` per relayed chunk.
  It reads uvicorn's ``RequestResponseCycle`` (``response_started``, ``chunked_encoding``,
  ``response_complete``, ``disconnected``, ``transport``, ``flow``): tests/runtime/test_stream_body.py
  fails if a uvicorn upgrade changes them.

A deadline counts the bytes that reached the gateway by then, read or not: a timer that finds its
deadline passed lets the loop read the socket once more before it closes the connection. uvloop runs
an iteration's due timers before it polls the sockets, so a process starved past a deadline (a busy
host) would otherwise close, without a word, a connection whose request had arrived in time.

The limits are read from the gateway's current plan when a connection is made: after a reload, new
connections get the new ones.
Every close is counted in ``interlock_connections_closed_total{reason}``; reaching the cap is logged
(at most once per ``WARN_EVERY_S``), timeouts at debug level.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from interlock.runtime.asgi import Disconnect
from interlock.runtime.serving.cork import CorkedTransport
from interlock.runtime.wire.openai_chat import error_body

if TYPE_CHECKING:
    from interlock.runtime.tables import ServerSettings

log = logging.getLogger("interlock.connections")

STREAM_BODY = "interlock.stream_body"  # the ASGI scope extension that holds a request's StreamBody
DISCONNECT = "interlock.disconnect"  # the ASGI scope extension that holds a request's Disconnect
WARN_EVERY_S = 10.0  # the cap's warning is repeated at most this often (with a count of what it missed)
READ_FIRST_S = 0.001  # past a deadline, the close waits this long: one poll of the sockets comes first
LINGER_S = 2.0  # a refused connection's request is read and dropped for at most this long


def _canned(status: str, message: str, code: str, extra: bytes = b"") -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, with an OpenAI-shaped error body."""
    body = error_body(message, "invalid_request_error", code=code)
    head = b"HTTP/1.1 %b\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n"
    return head % (status.encode(), len(body)) + extra + b"\r\n" + body


REQUEST_TIMEOUT = _canned("408 Request Timeout", "the request did not arrive in time", "request_timeout")
WEBSOCKET_REFUSED = _canned(
    "400 Bad Request",
    "WebSocket is not supported: this gateway answers plain HTTP (stream with `stream: true`)",
    "websocket_unsupported",
)


class _Gauge(Protocol):
    def set(self, value: float) -> None: ...


class _Count(Protocol):
    def inc(self, amount: float = 1.0) -> None: ...


class _Counts(Protocol):
    def labels(self, *values: str) -> _Count: ...


class ConnectionMetrics(Protocol):
    """What a ``ConnectionBook`` counts into: ``metrics.Metrics``'s two connection families. A Protocol,
    so that serving/ stays below the metrics (which read the plan, which reads ``serving.cors``)."""

    @property
    def connections_open(self) -> _Gauge: ...

    @property
    def connections_closed(self) -> _Counts: ...


class ConnectionBook:
    """The open client connections of one process, the idle ones oldest first, and the cap's log."""

    def __init__(
        self,
        settings: Callable[[], ServerSettings],
        metrics: ConnectionMetrics,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.open: set[GuardedProtocol] = set()
        self.idle: dict[GuardedProtocol, None] = {}  # insertion order: the oldest idle one first
        self._warned: dict[str, tuple[float, int]] = {}  # outcome -> (last warned at, missed since)

    def admit(self, conn: GuardedProtocol) -> bool:
        """Count a new connection; at the cap, close the oldest idle one. False: refuse ``conn``."""
        self.open.add(conn)
        self.metrics.connections_open.set(len(self.open))
        limit = self.settings().max_connections
        if len(self.open) <= limit:
            return True
        oldest = next(iter(self.idle), None)
        if oldest is not None:
            oldest.close_for("evicted")
            self._at_cap(limit, "closed the oldest idle connection to admit a new one")
            return True
        self._at_cap(limit, "refused a new connection with 503, none is idle")
        return False

    def forget(self, conn: GuardedProtocol) -> None:
        self.open.discard(conn)
        self.idle.pop(conn, None)
        self.metrics.connections_open.set(len(self.open))

    def _at_cap(self, limit: int, what: str) -> None:
        """Log reaching the cap: at most once per ``WARN_EVERY_S`` for each outcome, with a count."""
        now = self.clock()
        warned_at, missed = self._warned.get(what, (None, 0))
        if warned_at is not None and now - warned_at < WARN_EVERY_S:
            self._warned[what] = (warned_at, missed + 1)
            return
        more = f" ({missed} more since the last warning)" if missed else ""
        log.warning("connection limit reached (server.max_connections is %d): %s%s", limit, what, more)
        self._warned[what] = (now, 0)


class StreamBody:
    """The body of one request's chunked answer, written straight to its connection's transport.

    What uvicorn's ``send`` does for each ``http.response.body`` message of a chunked answer, less what
    only the first message needs: one framed write per piece. The ASGI ``send`` still starts the
    answer (its headers, CORS's among them) and ends it (the last piece, the terminating chunk and the
    keep-alive bookkeeping); only the pieces between go this way, and only once ``ready`` says the
    answer is started and chunked. Flow control is uvicorn's: ``write`` returns True when the
    transport's buffer is over its high-water mark, and the caller awaits ``drain`` (resumed when the
    buffer drains or the client goes). A gone client's pieces are dropped, as ``send`` drops them.
    """

    __slots__ = ("_cycle",)

    def __init__(self, cycle: RequestResponseCycle) -> None:
        # A weak reference: the cycle holds the scope, which holds this; a strong one would make every
        # request a reference cycle (about a dozen objects) that only the cyclic collector frees.
        self._cycle = weakref.ref(cycle)

    def ready(self) -> bool:
        """The answer is started, chunked, not finished, and has a body (not HEAD)."""
        cycle = self._cycle()
        return (
            cycle is not None
            and cycle.response_started
            and cycle.chunked_encoding is True
            and not cycle.response_complete
            and cycle.scope["method"] != "HEAD"
        )

    def write(self, data: bytes) -> bool:
        """Write ``data`` (not empty) as one chunk; True: await ``drain`` before writing more."""
        cycle = self._cycle()
        if cycle is None or cycle.disconnected:
            return False
        cycle.transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        return cycle.flow.write_paused

    async def drain(self) -> None:
        cycle = self._cycle()
        if cycle is not None:
            await cycle.flow.drain()


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the timeouts and the cap above; ``book`` is set by
    ``guarded_protocol`` on a subclass, so uvicorn can build instances with its own arguments.

    One timer per connection, re-armed lazily: a request moves the deadlines (plain assignments), and
    the timer, when it fires, closes the connection or re-arms itself for the deadline now in force.
    A keep-alive connection answering request after request schedules a timer about once per timeout,
    not once per request.
    """

    book: ConnectionBook
    _limits: ServerSettings  # the plan's, when the connection was made
    _timer: asyncio.TimerHandle | None = None
    _state = "new"  # "headers": waiting for a request's headers; "body": reading one; "busy"; "closed";
    # "draining": refused over the cap, its request read and dropped
    _began = False  # a byte of the awaited request has arrived
    _headers_by = 0.0  # loop time: the headers must be complete by then
    _last_body = 0.0  # loop time of the last body bytes
    _read_past = -1.0  # the deadline past which the socket was given one more read (see _expired)
    _disconnect: Disconnect | None = None  # the current request's, until its answer is complete

    # -- connection ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CorkedTransport(transport, self.loop))  # a small answer: one send()
        self._limits = self.book.settings()
        if not self.book.admit(self):
            self._refuse()
            return
        self._await_headers()

    def _refuse(self) -> None:
        """The 503 of a connection over the cap: the answer and our end of the stream at once, then
        whatever the client sends is dropped until it closes, at most ``LINGER_S``."""
        self.book.forget(self)
        self._state = "draining"
        self.book.metrics.connections_closed.labels("over_limit").inc()
        self.transport.write(self._over_limit_answer())
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._timer = self.loop.call_later(LINGER_S, self.transport.close)

    def data_received(self, data: bytes) -> None:
        if self._state == "draining":
            return  # the refused connection's request: read, and dropped
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.book.forget(self)
        super().connection_lost(exc)
        self._client_gone()

    def _client_gone(self) -> None:
        """Tell the request being answered, if any, that its client is gone."""
        disconnect = self._disconnect
        if disconnect is not None:
            self._disconnect = None
            disconnect.fire()

    def close_for(self, reason: str, answer: bytes = b"") -> None:
        """Close this connection now (writing ``answer`` first), counted under ``reason``."""
        self._disarm()
        self.book.forget(self)
        self._state = "closed"
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the app's receive() sees http.disconnect; send() is dropped
            self.cycle.message_event.set()
            self._client_gone()
        self.book.metrics.connections_closed.labels(reason).inc()
        if not self.transport.is_closing():
            if answer:
                self.transport.write(answer)
                self.transport.close()
            else:
                self.transport.abort()  # nothing to say: free the descriptor at once

    def _over_limit_answer(self) -> bytes:
        return _canned(
            "503 Service Unavailable",
            "the gateway has too many open connections "
            f"(server.max_connections is {self._limits.max_connections}); retry shortly",
            "too_many_connections",
            b"retry-after: 1\r\n",
        )

    # -- states and the timer --------------------------------------------------------------------

    def _await_headers(self) -> None:
        self._state = "headers"
        idle = self.book.idle
        idle.pop(self, None)
        idle[self] = None  # (re)inserted: now the newest idle connection
        self._headers_by = deadline = self.loop.time() + self._limits.header_timeout_s
        self._fire_by(deadline)

    def _fire_by(self, deadline: float) -> None:
        """Make sure the timer fires no later than ``deadline`` (an earlier one is kept)."""
        timer = self._timer
        if timer is not None:
            if timer.when() <= deadline:
                return
            timer.cancel()
        self._timer = self.loop.call_at(deadline, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self._state == "headers":
            deadline = self._headers_by
        elif self._state == "body":
            deadline = self._last_body + self._limits.body_timeout_s
        else:
            return  # "busy": the app has the request; the timer is armed again when the connection next waits
        if self.loop.time() < deadline:
            self._fire_by(deadline)
            return
        if self._read_past != deadline:  # read what has arrived first (a delay of 0 would not: call_soon)
            self._read_past = deadline
            self._timer = self.loop.call_later(READ_FIRST_S, self._expired)
            return
        if self._state == "headers":
            log.debug("closing a connection: no complete request headers within server.header_timeout")
            self.close_for("header_timeout", REQUEST_TIMEOUT if self._began else b"")
        else:
            log.debug("closing a connection: its request body stalled for server.body_timeout")
            started = self.cycle is not None and self.cycle.response_started
            self.close_for("body_timeout", b"" if started else REQUEST_TIMEOUT)

    # -- parser callbacks ------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._began = True

    def on_headers_complete(self) -> None:
        self.book.idle.pop(self, None)
        self._state, self._began = "body", False  # "body" until on_message_complete (often at once)
        self._last_body = now = self.loop.time()
        self._fire_by(now + self._limits.body_timeout_s)
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope:  # (an upgrade has no cycle of its own)
            extensions: dict[str, object] = self.scope.setdefault("extensions", {})  # type: ignore[assignment]
            extensions[STREAM_BODY] = StreamBody(cycle)
            extensions[DISCONNECT] = self._disconnect = Disconnect()

    def on_body(self, body: bytes) -> None:
        self._last_body = self.loop.time()
        super().on_body(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        if self._state == "body":
            self._state = "busy"

    def on_response_complete(self) -> None:
        self._disconnect = None  # answered: the client may go now
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        if not pipelined and self._state != "closed" and not self.transport.is_closing():
            self._await_headers()

    # -- WebSocket: refused here, without the app or a WebSocket library ---------------------------

    def _should_upgrade_to_ws(self) -> bool:
        return True  # every `Upgrade: websocket` reaches handle_websocket_upgrade below

    def handle_websocket_upgrade(self) -> None:
        log.debug("refused a WebSocket upgrade")
        self.close_for("websocket", WEBSOCKET_REFUSED)


def guarded_protocol(book: ConnectionBook) -> type[GuardedProtocol]:
    """The protocol class to give uvicorn (``Config(http=...)``) for connections counted in ``book``."""
    return type("Guarded", (GuardedProtocol,), {"book": book})
