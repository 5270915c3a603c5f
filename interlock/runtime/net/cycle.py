"""One request's exchange on a client connection: its ASGI ``receive`` and ``send``, its body as it
arrives, and its answer's framing, byte for byte what uvicorn's ``RequestResponseCycle`` writes for the
answers this gateway gives (``net/connections.py`` parses the requests and owns the connection).

The answer's head is held and written with the first piece of its body (one ``send()`` for a small
answer; a stream's head goes out by the end of the loop step that started it); a streamed answer's
pieces may be written straight to the transport (``asgi.StreamBody``: one framed write per piece). Header
names are checked once per distinct name (``MAX_NAMES`` kept), values in one ``translate`` over the
built head.
"""

from __future__ import annotations

import asyncio
import http
import logging
from collections.abc import Iterable
from typing import Any, Protocol

from interlock.runtime.base.asgi import Disconnect, Header, Message

server_log = logging.getLogger("uvicorn.error")  # what uvicorn's protocol logged, logged where it did

BIG_WRITE = 65536  # a body this long is written after its head, not copied onto it
# uvicorn's checks of answer headers, as tables: ``bytes.translate`` makes a forbidden byte 0, any other 1
# (a regular expression's search cost ~20 instructions a byte; this ~3, and no table is built per call)
_NAME_FORBIDDEN = bytes(range(0x20)) + b'\x7f()<>@,;:[]={} \\"'
_VALUE_FORBIDDEN = bytes(range(0x09)) + bytes(range(0x0A, 0x20)) + b"\x7f"
NAME_TABLE = bytes(0 if b in _NAME_FORBIDDEN else 1 for b in range(256))
VALUE_TABLE = bytes(0 if b in _VALUE_FORBIDDEN else 1 for b in range(256))
MAX_NAMES = 1024  # answer header names a process keeps as checked (a few dozen in use: the app's own)
FRAMING = frozenset((b"content-length", b"transfer-encoding", b"connection"))  # answer headers read here
SERVER_ERROR_HEADERS = [
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"content-length", b"21"),
    (b"connection", b"close"),
]


def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %b\r\n" % (status, phrase)


STATUS_LINE = {status: _status_line(status) for status in range(100, 600)}


class Connection(Protocol):
    """What a request needs of its connection (``connections.GuardedProtocol`` is one)."""

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    server_state: Any  # uvicorn's ServerState: its default headers and its tasks
    access_log: bool

    @property
    def book(self) -> Any: ...  # the ConnectionBook: its ``names`` (answer header names checked)

    @property
    def write_paused(self) -> bool: ...

    async def drain(self) -> None: ...

    def resume_reading(self) -> None: ...

    def log_access(self, request: Request, status: int) -> None: ...

    def on_response_complete(self, request: Request) -> None: ...


class Request(Disconnect):
    """One request on a connection: the ASGI ``receive`` and ``send`` of it, its body as it arrives,
    its answer's framing. It is also the request's ``Disconnect`` (fired when the client goes with the
    answer unfinished) and its ``StreamBody``, so a request costs one object beside its scope.

    It holds no reference to its scope (the scope's extensions hold it): nothing per request is a
    reference cycle. ``send`` frames what uvicorn's would, byte for byte, for the answers this gateway
    gives: the status line, the headers (names lowercased, checked for forbidden bytes), ``connection:
    close`` when the connection will close, chunked framing when no Content-Length is given.
    """

    __slots__ = (
        "body",
        "chunked",
        "complete",
        "conn",
        "continue_",
        "disconnected",
        "head",
        "is_head",
        "keep_alive",
        "last_read",
        "left",
        "line",
        "method",
        "more_body",
        "started",
        "waiter",
    )

    def __init__(self, conn: Connection, method: str, keep_alive: bool, expect_continue: bool) -> None:
        self.callback = None
        self.loop = conn.loop
        self.conn = conn
        self.method = method
        self.is_head = method == "HEAD"
        self.keep_alive = keep_alive
        self.continue_ = expect_continue  # `Expect: 100-continue`: say so at the first receive
        self.body: list[bytes] = []  # arrived, not yet received
        self.more_body = True
        self.last_read = False  # the last http.request message was handed over
        self.waiter: asyncio.Future[None] | None = None
        self.disconnected = False
        self.started = False
        self.complete = False
        self.chunked: bool | None = None
        self.left = 0  # body bytes still owed by a Content-Length answer
        self.head = b""  # the answer's status line and headers, held to be written with its body
        self.line = ""  # the access log's "METHOD path HTTP/version" (only with --access-log text)

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- ASGI ------------------------------------------------------------------------------------

    async def receive(self) -> Message:
        conn = self.conn
        if self.continue_:
            self.continue_ = False
            if not conn.transport.is_closing():
                conn.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if (
            not self.disconnected
            and not self.complete
            and (self.last_read or not (self.body or not self.more_body))
        ):
            conn.resume_reading()
            self.waiter = waiter = conn.loop.create_future()
            try:
                await waiter
            finally:
                self.waiter = None
        if self.disconnected or self.complete:
            return {"type": "http.disconnect"}
        parts = self.body
        body = b"".join(parts)
        parts.clear()
        if not self.more_body:
            self.last_read = True
        return {"type": "http.request", "body": body, "more_body": self.more_body}

    async def send(self, message: Message) -> None:
        conn = self.conn
        if conn.write_paused and not self.disconnected:
            await conn.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if not self.started:
            if kind != "http.response.start":
                raise RuntimeError(f"Expected ASGI message 'http.response.start', but got '{kind}'.")
            self._start(message["status"], message.get("headers", ()))
        elif not self.complete:
            if kind != "http.response.body":
                raise RuntimeError(f"Expected ASGI message 'http.response.body', but got '{kind}'.")
            self._body(message.get("body", b""), message.get("more_body", False))
        else:
            raise RuntimeError(f"Unexpected ASGI message '{kind}' sent, after response already completed.")

    def _start(self, status: int, headers: Iterable[Header]) -> None:
        conn = self.conn
        self.started = True
        self.continue_ = False
        if conn.access_log:
            conn.log_access(self, status)
        default = conn.server_state.default_headers
        if default:
            headers = [*default, *headers]
        lines = [STATUS_LINE.get(status) or b"HTTP/1.1 %d \r\n" % status]
        close = False
        names = conn.book.names
        for name, value in headers:
            name = name.lower()
            if name not in names:  # a name not seen before: checked once (and kept, up to MAX_NAMES)
                if 0 in name.translate(NAME_TABLE):
                    raise RuntimeError("Invalid HTTP header name.")
                if len(names) < MAX_NAMES:
                    names.add(name)
            if name in FRAMING:
                if name == b"content-length":
                    if self.chunked is None:
                        self.left = int(value)
                        self.chunked = False
                elif name == b"transfer-encoding":
                    if value.lower() == b"chunked":
                        self.left = 0
                        self.chunked = True
                elif b"close" in [t.strip() for t in value.lower().split(b",")]:
                    self.keep_alive = False
                    close = True
            lines.append(b"%b: %b\r\n" % (name, value))
        if not self.keep_alive and not close:
            lines.append(b"connection: close\r\n")
        if self.chunked is None and not self.is_head and status not in (204, 304):
            self.chunked = True
            lines.append(b"transfer-encoding: chunked\r\n")
        lines.append(b"\r\n")
        head = b"".join(lines)
        # the values, in one pass over the head: each line's CR LF are its only bytes a value may not hold
        if head.translate(VALUE_TABLE).count(0) != 2 * len(lines):
            raise RuntimeError("Invalid HTTP header value.")
        if self.is_head or not (self.chunked or self.left):
            conn.transport.write(head)  # no body follows
        else:
            self.head = head  # written with the first piece of the body: one send() for both
            if self.chunked:
                conn.loop.call_soon(self.flush)  # a stream's head goes out by the end of this step

    def _body(self, body: bytes, more_body: bool) -> None:
        if self.is_head:
            self.left = 0
            data = b""
        elif self.chunked:
            data = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
            if not more_body:
                data += b"0\r\n\r\n"
        else:
            size = len(body)
            if size > self.left:
                raise RuntimeError("Response content longer than Content-Length")
            self.left -= size
            data = body
        self._write(data)
        if not more_body:
            if self.left:
                raise RuntimeError("Response content shorter than Content-Length")
            self.complete = True
            self.wake()
            if not self.keep_alive:
                self.conn.transport.close()
            self.conn.on_response_complete(self)

    def _write(self, data: bytes) -> None:
        """Write ``data``, after the held head if any (joined to it unless ``data`` is large)."""
        head = self.head
        if head:
            self.head = b""
            if len(data) < BIG_WRITE:
                data = head + data
            else:
                self.conn.transport.write(head)
        if data:
            self.conn.transport.write(data)

    def flush(self) -> None:
        """Write the held head, if nothing has taken it along yet."""
        if self.head and not self.disconnected:
            self._write(b"")

    def done(self, task: asyncio.Task[None]) -> None:
        """The app's task ended: what uvicorn does when it failed or did not answer."""
        conn = self.conn
        conn.server_state.tasks.discard(task)
        failure = task.exception() if not task.cancelled() else asyncio.CancelledError()
        if failure is not None:
            server_log.error("Exception in ASGI application\n", exc_info=failure)
            if self.started:
                conn.transport.close()
                return
        elif self.disconnected or self.complete:
            return
        elif self.started:
            server_log.error("ASGI callable returned without completing response.")
            conn.transport.close()
            return
        else:
            server_log.error("ASGI callable returned without starting response.")
        if not self.disconnected:
            self._start(500, SERVER_ERROR_HEADERS)
            self._body(b"Internal Server Error", False)

    # -- StreamBody --------------------------------------------------------------------------------

    def ready(self) -> bool:
        """The answer is started, chunked, not finished, and has a body (not HEAD)."""
        return self.started and self.chunked is True and not self.complete and not self.is_head

    def write(self, data: bytes) -> bool:
        """Write ``data`` (not empty) as one chunk; True: await ``drain`` before writing more."""
        if self.disconnected:
            return False
        conn, piece = self.conn, b"%x\r\n%b\r\n" % (len(data), data)
        if self.head:  # the first piece takes the held head along
            self._write(piece)
        else:
            conn.transport.write(piece)
        return conn.write_paused

    async def drain(self) -> None:
        await self.conn.drain()
