"""Client connections: HTTP/1.1 on httptools, with a header-read timeout, a body-read idle timeout and a
cap on open connections.

uvicorn runs the process (the listening socket, lifespan, signals, the graceful drain on SIGTERM);
each client connection is a ``GuardedProtocol`` of this module, built by uvicorn with its own
arguments (``guarded_protocol``). It parses with httptools and calls the ASGI app with one ``Request``
(``cycle.py``) per request (its ``receive``, its ``send``, its body, its answer's framing): what uvicorn's
``HttpToolsProtocol`` and ``RequestResponseCycle`` do for the requests this gateway serves, without
their per-request event, flow-control and cycle objects (bench/server_layer.py measures the two).
Kept from uvicorn, byte for byte where a client can see it: keep-alive (HTTP/1.1 unless
``Connection: close``; HTTP/1.0 closes), pipelining (a request parsed while one is answered waits,
reading paused, and starts when the answer ends), chunked request bodies, ``100 Continue``, the
framing of answers (``connection: close``, chunked encoding without a Content-Length, nothing for
HEAD, 204 and 304), the 400 for a request httptools cannot parse, the 500 when the app fails before
answering, ``uvicorn.access``'s line per request (``--access-log text``) and the idle keep-alive close
after uvicorn's ``timeout_keep_alive``. The gateway adds:

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
  as the ASGI scope extension ``interlock.stream_body``): one framed write per piece, under the
  connection's flow control, instead of a message dict and a coroutine through ASGI ``send``;
- the client going away is said to the request at once (``asgi.Disconnect``, the scope extension
  ``interlock.disconnect``): watching for it costs no task;
- an answer's head is written with the first piece of its body: one ``send()`` for a small answer
  (a stream's head is held no longer than the loop step that started it).

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
import urllib.parse
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, cast

import httptools

from interlock.runtime.base.asgi import (
    DISCONNECT,
    STREAM_BODY,
    Header,
    Receive,
    Scope,
    Send,
)
from interlock.runtime.net.cycle import Request
from interlock.runtime.net.head import (
    HEAD_TOO_LARGE,
    INVALID_HOST,
    MAX_HEAD_BYTES,
    MAX_HEADER_FIELDS,
    HeadRefused,
    canned,
)

if TYPE_CHECKING:
    from uvicorn import Config
    from uvicorn.server import ServerState

    from interlock.runtime.base.server_settings import ServerSettings

log = logging.getLogger("interlock.connections")
server_log = logging.getLogger("uvicorn.error")  # what uvicorn's protocol logged, logged where it did
access_log = logging.getLogger("uvicorn.access")

WARN_EVERY_S = 10.0  # the cap's warning is repeated at most this often (with a count of what it missed)
READ_FIRST_S = 0.001  # past a deadline, the close waits this long: one poll of the sockets comes first
LINGER_S = 2.0  # a refused connection's request is read and dropped for at most this long
HIGH_WATER = 65536  # request body bytes buffered before reading pauses (uvicorn's limit)
# ``b"?" in url`` first tries ``b"?"`` as an integer and formats a TypeError (~0.6 µs); an int is a memchr
QUESTION, HASH = ord("?"), ord("#")
METHODS = {m.encode(): m for m in ("GET", "POST", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH")}


REQUEST_TIMEOUT = canned("408 Request Timeout", "the request did not arrive in time", "request_timeout")
WEBSOCKET_REFUSED = canned(
    "400 Bad Request",
    "WebSocket is not supported: this gateway answers plain HTTP (stream with `stream: true`)",
    "websocket_unsupported",
)
INVALID_REQUEST = (  # uvicorn's answer to what httptools cannot parse
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 30\r\n"
    b"connection: close\r\n\r\nInvalid HTTP request received."
)


class _Gauge(Protocol):
    def set(self, value: float) -> None: ...


class _Count(Protocol):
    def inc(self, amount: float = 1.0) -> None: ...


class _Counts(Protocol):
    def labels(self, *values: str) -> _Count: ...


class ConnectionMetrics(Protocol):
    """What a ``ConnectionBook`` counts into: ``metrics.Metrics``'s two connection families. A Protocol,
    so that net/ stays below the metrics (which read the plan, which reads ``net.fds``)."""

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
        self.names: set[bytes] = set()  # answer header names found valid, at most MAX_NAMES (``Request``)

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


class GuardedProtocol(asyncio.Protocol):
    """One client connection (HTTP/1.1 on httptools) with the timeouts and the cap above; ``book`` is
    set by ``guarded_protocol`` on a subclass, so uvicorn can build instances with its own arguments.

    One timer per connection, re-armed lazily: a request moves the deadlines (plain assignments), and
    the timer, when it fires, closes the connection or re-arms itself for the deadline now in force.
    A keep-alive connection answering request after request schedules a timer about once per timeout,
    not once per request.
    """

    book: ConnectionBook
    transport: asyncio.Transport
    _limits: ServerSettings  # the plan's, when the connection was made

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if not config.loaded:
            config.load()
        self.app: Callable[[Scope, Receive, Send], Coroutine[Any, Any, None]] = config.loaded_app
        self.loop = _loop or asyncio.get_event_loop()
        self.server_state = server_state
        self.app_state = app_state
        self.root_path = config.root_path
        self.keep_alive_s = float(config.timeout_keep_alive)
        self.access_log = bool(config.access_log) and access_log.hasHandlers()
        self.parser = httptools.HttpRequestParser(self)
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)  # answer a pipelined first
        self.server: tuple[str, int | None] | None = None
        self.client: tuple[str, int] | None = None
        self.reading: Request | None = None  # the request whose body is being read (the newest)
        self.answering: Request | None = None  # the request whose app runs (the oldest unanswered)
        self.pipeline: deque[tuple[Request, Scope]] = deque()  # parsed, waiting for the one answering
        self.write_paused = False
        self.read_paused = False
        self._writable: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._state = "new"  # "headers": waiting for a request's headers; "body": reading one; "busy";
        # "closed"; "draining": refused over the cap, its request read and dropped
        self._began = False  # a byte of the awaited request has arrived
        self._headers_by = 0.0  # loop time: the headers must be complete by then
        self._idle_by = 0.0  # loop time: a keep-alive pause with nothing sent closes then (uvicorn's)
        self._last_body = 0.0  # loop time of the last body bytes
        self._read_past = -1.0  # the deadline past which the socket was given one more read (see _expired)
        self._url: list[bytes] = []  # the request target's pieces, as the parser hands them over
        self._headers: list[Header] = []
        self._head_size = 0  # bytes of the request line and header fields parsed so far (head.py)
        self._head_fed = 0  # bytes read while one head stayed incomplete (what the parser buffers)
        self._heads = 0  # heads begun on this connection: a read that began one is not counted above
        self._hosts = 0  # Host fields of the request being parsed
        self._refusal: tuple[str, bytes] | None = None  # why a callback stopped the parser
        self._continue = False
        self._upgrade = False  # a WebSocket upgrade: refused once the parser stops at it

    # -- connection ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast("asyncio.Transport", transport)  # (uvloop's is not a subclass)
        self.server_state.connections.add(self)  # type: ignore[arg-type]  # uvicorn drains these when it stops
        self.server = _address(transport.get_extra_info("sockname"))
        self.client = _address(transport.get_extra_info("peername"))
        self._limits = self.book.settings()
        if not self.book.admit(self):
            self._refuse()
            return
        self._await_headers(self._limits.header_timeout_s)

    def _refuse(self) -> None:
        """The 503 of a connection over the cap: the answer and our end of the stream at once, then
        whatever the client sends is dropped until it closes, at most ``LINGER_S``."""
        self._answer_and_drain("over_limit", self._over_limit_answer())

    def _answer_and_drain(self, reason: str, answer: bytes) -> None:
        """Answer, end our side, then read and drop what the client still sends (so it reads the answer,
        not a reset) until it closes, at most ``LINGER_S``; counted under ``reason``. With an answer to
        an earlier request still being written (pipelining), the connection is closed at once instead."""
        if self.answering is not None:
            self.close_for(reason, answer)
            return
        self._disarm()
        self.book.forget(self)
        self._client_gone()
        self._state = "draining"
        self.book.metrics.connections_closed.labels(reason).inc()
        self.transport.write(answer)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._timer = self.loop.call_later(LINGER_S, self.transport.close)

    def data_received(self, data: bytes) -> None:
        if self._state == "draining":
            return  # the refused connection's request: read, and dropped
        heads = self._heads
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError:
            if self._refusal is None:
                raise
            log.debug("refused a request's head: %s", self._refusal[0])
            self._answer_and_drain(*self._refusal)
            return
        except httptools.HttpParserUpgrade:
            if self._upgrade:
                log.debug("refused a WebSocket upgrade")
                self.close_for("websocket", WEBSOCKET_REFUSED)
            else:
                server_log.warning("Unsupported upgrade request.")
        except httptools.HttpParserError:
            server_log.warning("Invalid HTTP request received.")
            self.close_for("invalid", INVALID_REQUEST, count=False)
            return
        if self._began and heads == self._heads:  # the whole read went to one head, still incomplete
            self._head_fed += len(data)
            if self._head_fed > MAX_HEAD_BYTES:
                self._answer_and_drain("headers_too_large", HEAD_TOO_LARGE)

    def eof_received(self) -> None:
        pass  # the client may half-close after its request: its answer still goes out

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.book.forget(self)
        self.server_state.connections.discard(self)
        self._client_gone()
        self.resume_writing()
        self.parser = None  # type: ignore[assignment]  # it holds this protocol: no cycle is left
        if exc is None:
            self.transport.close()

    def _client_gone(self) -> None:
        """Tell the requests not answered yet that their client is gone."""
        gone = [self.answering, self.reading, *(request for request, _ in self.pipeline)]
        self.answering = self.reading = None
        self.pipeline.clear()
        for request in gone:
            if request is not None and not request.complete and not request.disconnected:
                request.disconnected = True
                request.wake()
                request.fire()

    def close_for(self, reason: str, answer: bytes = b"", *, count: bool = True) -> None:
        """Close this connection now (writing ``answer`` first), counted under ``reason``."""
        self._disarm()
        self.book.forget(self)
        self._state = "closed"
        self._client_gone()
        if count:
            self.book.metrics.connections_closed.labels(reason).inc()
        if not self.transport.is_closing():
            if answer:
                self.transport.write(answer)
                self.transport.close()
            else:
                self.transport.abort()  # nothing to say: free the descriptor at once

    def shutdown(self) -> None:
        """uvicorn's graceful stop: close an idle connection now, a busy one after its answer."""
        answering = self.answering
        if answering is None:
            self.transport.close()
        else:
            answering.keep_alive = False

    def _over_limit_answer(self) -> bytes:
        return canned(
            "503 Service Unavailable",
            "the gateway has too many open connections "
            f"(server.max_connections is {self._limits.max_connections}); retry shortly",
            "too_many_connections",
            b"retry-after: 1\r\n",
        )

    # -- flow control ----------------------------------------------------------------------------

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    async def drain(self) -> None:
        """Return once the transport's buffer is under its low-water mark (or the client is gone)."""
        if self.write_paused:
            if self._writable is None:
                self._writable = self.loop.create_future()
            await asyncio.shield(self._writable)

    def pause_reading(self) -> None:
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()

    # -- states and the timer --------------------------------------------------------------------

    def _await_headers(self, idle_s: float) -> None:
        """Wait for the next request's headers: for ``header_timeout``, and when nothing at all comes,
        for ``idle_s`` (the keep-alive timeout after an answer)."""
        self._state = "headers"
        idle = self.book.idle
        idle.pop(self, None)
        idle[self] = None  # (re)inserted: now the newest idle connection
        now = self.loop.time()
        self._headers_by = now + self._limits.header_timeout_s
        self._idle_by = now + idle_s
        self._fire_by(min(self._headers_by, self._idle_by))

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
            deadline = self._headers_by if self._began else min(self._headers_by, self._idle_by)
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
            if not self._began and deadline == self._idle_by < self._headers_by:
                self.close_for("keep_alive", count=False)  # uvicorn's keep-alive timeout: not counted
                return
            log.debug("closing a connection: no complete request headers within server.header_timeout")
            self.close_for("header_timeout", REQUEST_TIMEOUT if self._began else b"")
        else:
            log.debug("closing a connection: its request body stalled for server.body_timeout")
            request = self.reading
            started = request is not None and request.started
            self.close_for("body_timeout", b"" if started else REQUEST_TIMEOUT)

    # -- parser callbacks ------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._began = True
        self._url = []
        self._headers = []
        self._head_size = self._head_fed = self._hosts = 0
        self._heads += 1
        self._continue = False

    def on_url(self, url: bytes) -> None:
        self._head_size += len(url)
        if self._head_size > MAX_HEAD_BYTES:
            self._refuse_head("headers_too_large", HEAD_TOO_LARGE)
        self._url.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value) + 4
        if self._head_size > MAX_HEAD_BYTES or len(self._headers) >= MAX_HEADER_FIELDS:
            self._refuse_head("headers_too_large", HEAD_TOO_LARGE)
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self._continue = True
        elif name == b"host":
            self._hosts += 1
        self._headers.append((name, value))

    def _refuse_head(self, reason: str, answer: bytes) -> None:
        """Stop the parser (``data_received`` answers ``answer`` and closes, counted as ``reason``)."""
        self._refusal = (reason, answer)
        raise HeadRefused(reason)

    def on_headers_complete(self) -> None:
        self.book.idle.pop(self, None)
        self._state, self._began = "body", False  # "body" until on_message_complete (often at once)
        self._last_body = now = self.loop.time()
        self._fire_by(now + self._limits.body_timeout_s)
        parser = self.parser
        headers = self._headers
        if self._hosts != 1 and (self._hosts or parser.get_http_version() != "1.0"):
            self._refuse_head("invalid_host", INVALID_HOST)
        if parser.should_upgrade() and _upgrade_of(headers) == b"websocket":
            self._upgrade = True  # the parser stops here: data_received refuses it
            return
        raw_method = parser.get_method()
        method = METHODS.get(raw_method) or raw_method.decode("ascii")
        version = parser.get_http_version()
        pieces = self._url
        url = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        if url[:1] == b"/" and QUESTION not in url and HASH not in url:  # (bytes as ints: see QUESTION)
            raw_path, query = url, b""  # the common case: httptools.parse_url would say the same
        else:
            parsed = httptools.parse_url(url)
            raw_path, query = parsed.path, parsed.query or b""
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        root = self.root_path
        request = Request(self, method, version != "1.0" and parser.should_keep_alive(), self._continue)
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": version,
            "server": self.server,
            "client": self.client,
            "scheme": "http",
            "method": method,
            "root_path": root,
            "path": root + path if root else path,
            "raw_path": root.encode("ascii") + raw_path if root else raw_path,
            "query_string": query,
            "headers": headers,
            "state": self.app_state.copy(),
            "extensions": {STREAM_BODY: request, DISCONNECT: request},
        }
        if self.access_log:
            target = urllib.parse.quote(scope["path"]) + ("?" + query.decode("ascii") if query else "")
            request.line = f"{method} {target} HTTP/{version}"
        self.reading = request
        if self.answering is None:
            self._start(request, scope)
        else:  # pipelined: it waits for the answer in progress, and reading pauses meanwhile
            self.pause_reading()
            self.pipeline.append((request, scope))

    def on_body(self, body: bytes) -> None:
        request = self.reading
        self._last_body = self.loop.time()
        if request is None or request.complete or self._upgrade:
            return
        request.body.append(body)
        if sum(map(len, request.body)) > HIGH_WATER:
            self.pause_reading()
        request.wake()

    def on_message_complete(self) -> None:
        if self._state == "body":
            self._state = "busy"
        request = self.reading
        if request is None or self._upgrade:
            return
        if request.complete:
            self.reading = None
            return
        request.more_body = False
        request.wake()

    # -- requests --------------------------------------------------------------------------------

    def _start(self, request: Request, scope: Scope) -> None:
        """The app's task for ``request`` (uvicorn waits for these when it stops)."""
        self.answering = request
        task = self.loop.create_task(self.app(scope, request.receive, request.send))
        self.server_state.tasks.add(task)
        task.add_done_callback(request.done)

    def on_response_complete(self, request: Request) -> None:
        """``request``'s answer is written: the next pipelined request starts, or the wait for one."""
        self.server_state.total_requests += 1
        if self.answering is request:
            self.answering = None
        if self.reading is request and not request.more_body:
            self.reading = None
        if self.transport.is_closing():
            return
        self.resume_reading()
        if self.pipeline:
            self._start(*self.pipeline.popleft())
        elif self._state != "closed":
            self._await_headers(self.keep_alive_s)

    def log_access(self, request: Request, status: int) -> None:
        """uvicorn's access line: ``client - "METHOD path HTTP/version" status``."""
        client = f"{self.client[0]}:{self.client[1]}" if self.client else ""
        access_log.info('%s - "%s" %d', client, request.line, status)


def _address(info: Any) -> tuple[str, int] | None:
    return (str(info[0]), int(info[1])) if isinstance(info, tuple | list) and len(info) >= 2 else None


def _upgrade_of(headers: list[Header]) -> bytes | None:
    """The ``Upgrade`` asked for when ``Connection`` says upgrade (uvicorn's test)."""
    connection: list[bytes] = []
    upgrade = None
    for name, value in headers:
        if name == b"connection":
            connection = [token.lower().strip() for token in value.split(b",")]
        elif name == b"upgrade":
            upgrade = value.lower()
    return upgrade if b"upgrade" in connection else None


def guarded_protocol(book: ConnectionBook) -> type[GuardedProtocol]:
    """The protocol class to give uvicorn (``Config(http=...)``) for connections counted in ``book``."""
    return type("Guarded", (GuardedProtocol,), {"book": book})


def _uvicorns(book: ConnectionBook) -> str:
    log.warning("INTERLOCK_SERVER=uvicorn: client connections run on uvicorn's own protocol (debugging)")
    return "httptools"


SERVERS: dict[str, Callable[[ConnectionBook], type[asyncio.Protocol] | str]] = {
    "own": guarded_protocol,
    "uvicorn": _uvicorns,
}
"""The client-connection protocols ``INTERLOCK_SERVER`` picks, as uvicorn's ``Config(http=...)`` takes
them: ``own`` (``GuardedProtocol``) or ``uvicorn`` (uvicorn's own on httptools, for debugging: is it our
server or the app? It has none of the header and body timeouts, the connection cap or the 431 above,
and offers no ``StreamBody`` or ``Disconnect``: the app then writes through ASGI ``send`` and learns of
a gone client from ``receive``)."""


def protocol_for(name: str, book: ConnectionBook) -> type[asyncio.Protocol] | str:
    """The protocol of the server ``name`` (a row of ``SERVERS``); ValueError for any other."""
    make = SERVERS.get(name)
    if make is None:
        raise ValueError(f"unknown server {name!r}; expected one of {', '.join(SERVERS)}")
    return make(book)
