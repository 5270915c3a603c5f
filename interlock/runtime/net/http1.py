"""The upstream connection: HTTP/1.1 on an asyncio Protocol with httptools' parser (llhttp), no more.

One ``Connection`` carries one exchange at a time (no pipelining); ``UpstreamClient``
(net/client.py) keeps them in a keep-alive pool per provider. A ``Response`` is handed over
once its headers are parsed; its body is read with ``read`` (what has arrived, ``b""`` at the end; or
``take``, the same without the wait, and ``arrival``) or ``read_all``, or taken as it arrives by a
``sink`` (a stream's relay, in the read callback), then ``release`` returns the connection to the pool
(or, when the body is not over yet, lets the connection discard the rest in the background and return
then) and ``close`` drops it. The answer's head is kept as it came (the bytes httptools validated: CRLF
line ends, no folding, no space before a colon); the framing headers are found in it with a few byte
searches, and the other headers are split out only when asked for (``raw_headers``, ``headers``: an
error's answer), so no parser callback runs per header.

Deadlines are one timer per connection (``loop.call_at``), never a task or an ``asyncio.timeout``: the
exchange's first-byte deadline until the caller calls ``answered()``, then the total one, and for a
stream answered with an idle limit (``answered(idle_s)``) also ``idle_s`` after the last read (each read
notes its time; the timer, when it fires, moves itself to the last read's time plus ``idle_s``, so a
stream that trickles schedules about one timer per ``idle_s``, not one per read). While the reader has
paused the connection (its caller is slow), the upstream's silence is the gateway's own: it never counts.
An exchange sent with ``patience`` (a server that reports its progress: ``fleet/signals/progress.py``)
asks it when the first-byte deadline passes, and waits on as long as it says (never past the total).
The timer is moved lazily, as the client connections' own (net/connections.py): a later
exchange's deadline leaves an earlier timer armed, and the timer, when it fires for a deadline that is
no longer the one in force, re-arms itself for it; an exchange's deadline is always met at the moment
a timer of its own would have fired, and a kept-alive connection schedules a timer about once per
deadline's length, not once per request. When a deadline passes, the connection is dropped and the
next read raises ``Timeout`` with the phase it was in.

Sizes: a response head over ``MAX_HEAD_BYTES`` is a ``HeadTooLarge`` (the bytes of the interim
answers before it count: the bound is on everything read before the body), more than ``MAX_INTERIM``
interim answers (a flood of ``102 Processing``) a ``BadResponse``; the head's bytes are gathered once
(no copy per read or per interim answer); the body is read with back-pressure
(the transport stops reading past ``HIGH_WATER`` bytes not yet read), so a fast upstream and a slow
reader cost bounded memory; the caps on bodies and stream lines are the exchange's (upstream/exchange.py).

Failures are this module's exception classes (``HTTPError`` and its subclasses), each raised with a
fixed message, so ``failures.EXCEPTION_MAP`` can map every one and tests can prove it. What counts as a
stale keep-alive connection (``Stale``) is decided here, where it is known for certain: the connection
was closed or reset before a single byte of the answer arrived; and whether the request went out at
all (``NotSent``): only a request that did not may be sent again.

One answer per request: a connection that shows a byte nobody asked for is dropped, never handed to
the next request. Bytes while it is idle (``data_received`` with no exchange, or ``unread`` finding
them in the kernel's buffer before reuse), a second message after the answer (in the same read or a
later one), or anything unparseable after a complete answer: the connection is aborted and the answer
already complete is kept (its framing said where it ends).
"""

from __future__ import annotations

import asyncio
import copy
import errno
import os
import select
import socket
from collections.abc import Callable
from typing import Any

import httptools

from interlock.runtime.net.http_errors import (
    FIRST_BYTE,
    IDLE,
    TOTAL,
    BadResponse,
    BodyTooLarge,
    CutShort,
    Disconnected,
    HeadTooLarge,
    HTTPError,
    Lost,
    NotSent,
    Reset,
    Timeout,
    UnsupportedEncoding,
)

MAX_HEAD_BYTES = 64 * 1024  # status lines and headers together, interim answers' (1xx) included
MAX_INTERIM = 5  # interim answers (100 Continue, 102 Processing, 103 Early Hints) before the real one (Go's)
HIGH_WATER = 256 * 1024  # unread body bytes past which the transport stops reading
DRAIN_MAX_S = 1.0  # how long a released body's rest may take before the connection is dropped
DRAIN_MAX_BYTES = 64 * 1024
_TOTAL_ARMED = "total, armed"
_NO_BODY = (204, 304)


def lost_error(exc: Exception | None) -> HTTPError:
    """The error for a connection lost before any byte of its answer: a close or a reset is ``Stale``,
    any other socket error (no route to host) is not."""
    if exc is None:
        return Disconnected("server disconnected")
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)) or (
        isinstance(exc, OSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE)
    ):
        return Reset("connection reset")
    return Lost("connection failed mid-exchange")


def _bytes_waiting(fd: int) -> bool:
    """Whether the socket ``fd`` holds unread bytes (not only a close or a reset): peeked at, not read
    (only when ``poll`` said it is readable, so an idle connection the upstream closed costs no more)."""
    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except OSError:  # a reset, or nothing after all
        return False


def _value(low: bytes, key: bytes) -> bytes | None:
    """The value of the header ``key`` (CR LF, the name, a colon) in ``low`` (the head lowercased), None
    without one; a repeated one's values joined with ``", "``; each as httptools gives it (leading
    blanks dropped). (``partition`` only: ``bytes.find`` parses its arguments the slow way, and ``in``
    tries the needle as an integer first, formatting a TypeError each time.)"""
    _, found, rest = low.partition(key)
    values = []
    while found:
        value, end, rest = rest.partition(b"\r\n")
        values.append(value.lstrip(b" \t"))
        _, found, rest = (end + rest).partition(key)  # (the line's CR LF starts the next one)
    if not values:
        return None
    return values[0] if len(values) == 1 else b", ".join(values)


class Connection(asyncio.Protocol):
    """One keep-alive connection to one origin; ``response`` is the exchange in flight (or draining)."""

    __slots__ = (
        "closed",
        "fd",
        "idle_since",
        "loop",
        "on_lost",
        "origin",
        "parser",
        "pooled",
        "response",
        "timer",
        "timer_at",
        "transport",
    )

    def __init__(
        self, origin: Any, on_lost: Callable[[Connection], None], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.origin = origin  # the pool's key object (client.py's Pool)
        self.on_lost = on_lost
        self.loop = loop  # (asked once: ``asyncio.get_running_loop`` costs a system call on 3.11)
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: Response | None = None
        self.closed = False
        self.pooled = False  # in its pool's idle list
        self.idle_since = 0.0
        self.fd = -1
        self.timer: asyncio.TimerHandle | None = None  # fires by the exchange's deadline (``arm``)
        self.timer_at = 0.0  # the deadline it was armed for

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport
        sock = transport.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1

    def unread(self, poller: select.poll) -> bool:
        """Whether anything waits on this idle connection that the loop has not handed over yet: bytes,
        a close or a reset already in the kernel's buffer (one ``poll`` system call, no wait). Bytes (not
        a close) are unsolicited: ``stray`` says so to the pool."""
        fd = self.fd
        if fd < 0:
            return False
        poller.register(fd, select.POLLIN)
        try:
            if not poller.poll(0):
                return False
        finally:
            poller.unregister(fd)
        if self.origin.ssl is None and _bytes_waiting(fd):  # (TLS: a close_notify is bytes too)
            self.origin.strayed()
        return True

    def send(
        self,
        data: bytes,
        body: bytes | None,
        first_byte_at: float,
        total_at: float,
        patience: Callable[[float], float | None] | None = None,
    ) -> Response:
        """Write one request; the returned Response's ``head()`` waits for the answer's headers.
        ``patience``: asked when the first-byte deadline passes (seconds more to wait, or None)."""
        response = Response(self, first_byte_at, total_at, patience)
        self.response = response
        transport = self.transport
        if transport is None or transport.is_closing():
            response.fail(NotSent("connection reset"))
            return response
        if body is None:
            transport.write(data)
        elif len(body) < 65536:
            transport.write(data + body)
        else:
            transport.writelines((data, body))
        if transport.is_closing():  # the write failed at once (asyncio's own loop sends in ``write``)
            response.fail(NotSent("connection reset"))
        return response

    def arm(self, deadline: float) -> None:
        """Make sure the timer fires by ``deadline`` (a timer armed for an earlier one is kept)."""
        timer = self.timer
        if timer is not None:
            if self.timer_at <= deadline:
                return
            timer.cancel()
        self.timer_at = deadline
        self.timer = self.loop.call_at(deadline, self._fired)

    def _fired(self) -> None:
        self.timer = None
        response = self.response
        if response is None or response._draining:  # idle, or a released body on its own timer
            return
        if response._deadline != self.timer_at:  # armed for an earlier exchange: wait for this one's
            self.arm(response._deadline)
            return
        response._expire()

    def stray(self) -> None:
        """Bytes nobody asked for arrived: the connection is dropped and its pool told (``Pool.strayed``:
        the provider's connections are not reused for a while)."""
        self.abort()
        self.origin.strayed()

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None:  # bytes while idle: the upstream is confused; this connection is done
            self.stray()
            return
        response.received = True
        response.last_at = self.loop.time()
        if not response.headed:  # the head's bytes, read by on_headers_complete
            unparsed = response.unparsed
            if not unparsed:
                response.unparsed = data  # (most heads come in one read: no copy)
            elif type(unparsed) is bytearray:
                unparsed += data  # in place: linear in what arrives
            else:
                response.unparsed = bytearray(unparsed) + data
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError:
            return  # a callback already failed the response
        except httptools.HttpParserUpgrade:
            response.fail(BadResponse("unexpected protocol upgrade"))
            return
        except httptools.HttpParserError:
            if response.done:  # bytes past a whole answer: the answer stands, the connection is done
                self.stray()
            else:
                response.fail(BadResponse("broken HTTP response"))
            return
        if not response.headed and len(response.unparsed) > MAX_HEAD_BYTES:  # (a partial head line too)
            response.fail(HeadTooLarge("response head too large"))

    # httptools callbacks
    def on_message_begin(self) -> None:
        response = self.response
        if response is None or response.done:  # a second answer to one request: nobody asked for it
            self.stray()
            raise httptools.HttpParserCallbackError("unasked-for response")  # stop parsing

    def on_headers_complete(self) -> None:
        response = self.response
        if response is None:
            return
        read, start = response.unparsed, response.head_at
        end = read.find(b"\r\n\r\n", start)  # httptools found the head's end: the first blank line
        status = self.parser.get_status_code()
        if status < 200:  # an interim answer (100 Continue): its message ends; the real one follows
            response.head_at = end + 4  # (an interim answer has no body; its bytes still count)
            response.interim += 1
            if response.interim > MAX_INTERIM:
                response.fail(BadResponse("too many interim responses"))
                raise httptools.HttpParserCallbackError("too many interim responses")  # stop parsing
            return
        if end > MAX_HEAD_BYTES:
            response.fail(HeadTooLarge("response head too large"))
            raise httptools.HttpParserCallbackError("head too large")  # stop parsing
        head = response.raw_head = read[start:end] if type(read) is bytes else bytes(read[start:end])
        response.unparsed = b""
        response.status = status
        response.keep_alive = self.parser.should_keep_alive()
        low = head.lower()  # only the framing headers are read: no list or dict of them all
        length = _value(low, b"\r\ncontent-length:")
        encoding = _value(low, b"\r\ncontent-encoding:")
        chunked = low.partition(b"\r\ntransfer-encoding:")[1]
        if length is not None and length.isdigit():
            response.content_length = int(length)
        response.open_ended = length is None and not chunked and status not in _NO_BODY
        if encoding is not None and encoding.strip().lower() not in (b"", b"identity"):
            response.fail(UnsupportedEncoding("compressed response"))
            raise httptools.HttpParserCallbackError("compressed")  # stop parsing
        response.headed = True
        response.wake()

    def on_body(self, body: bytes) -> None:
        response = self.response
        if response is None:
            return
        sink = response.sink
        if sink is not None:  # a stream being relayed: its reader takes the bytes here and now
            sink(body)
            return
        buffered = response._buffered + len(body)
        if response._draining or buffered > HIGH_WATER:
            response.feed(body)
            return
        response._buffer.append(body)  # (``feed`` inline: this runs once per stream chunk)
        response._buffered = buffered
        waiter = response._waiter
        if waiter is not None:
            response._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def on_message_complete(self) -> None:
        response = self.response
        if response is None:
            return
        if not response.headed:  # an interim answer's end
            return
        response.complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        response, self.response = self.response, None
        self.on_lost(self)
        if response is not None:
            response.lost(exc)
        self.transport = None

    def abort(self) -> None:
        """Drop the connection now (its pool forgets it in ``connection_lost``)."""
        self.closed = True
        transport = self.transport
        if transport is not None:
            transport.abort()


class Response:
    """One answer: status and headers (names lowercased), then the body as it arrives."""

    __slots__ = (
        "_buffer",
        "_buffered",
        "_deadline",
        "_draining",
        "_error",
        "_idle",
        "_loop",
        "_patience",
        "_paused",
        "_phase",
        "_started",
        "_timer",
        "_total_at",
        "_waiter",
        "conn",
        "content_length",
        "done",
        "head_at",
        "headed",
        "interim",
        "keep_alive",
        "last_at",
        "open_ended",
        "raw_head",
        "received",
        "sink",
        "status",
        "unparsed",
    )

    def __init__(
        self,
        conn: Connection,
        first_byte_at: float,
        total_at: float,
        patience: Callable[[float], float | None] | None = None,
    ) -> None:
        self.conn: Connection | None = conn
        self.status = 0
        self.raw_head = b""  # the status line and headers as they came (no blank line); ``headers`` reads it
        # what arrived while the head was not complete (on_headers_complete reads it)
        self.unparsed: bytes | bytearray = b""
        self.content_length: int | None = None
        self.keep_alive = False
        self.open_ended = False  # no length and not chunked: the body ends when the connection does
        self.received = False  # any byte of the answer
        self.last_at = 0.0  # when the last one arrived (the loop's clock): the idle deadline reads it
        # set by a reader that takes body bytes as they arrive, in the connection's read callback
        # (a stream's relay): nothing is buffered then, and only the end or a failure wakes the reader
        self.sink: Callable[[bytes], None] | None = None
        self.headed = False
        self.interim = 0  # interim answers (1xx) read so far
        self.head_at = 0  # where in ``unparsed`` the head being read starts (after the interim ones)
        self.done = False  # the whole message has arrived
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._draining = False
        self._error: HTTPError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._total_at = total_at
        self._phase = FIRST_BYTE
        self._idle = 0.0  # the longest silence after ``answered(idle_s)``; 0: none
        self._loop = conn.loop
        self._timer: asyncio.TimerHandle | None = None  # a released body's drain (deadlines: conn.arm)
        self._deadline = first_byte_at  # the deadline in force: the connection's timer reads it
        self._patience = patience  # the server's progress may move the first-byte deadline on
        self._started = conn.loop.time() if patience is not None else 0.0
        conn.arm(first_byte_at)

    @property
    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        """The headers as they came: names as sent, values less leading blanks (what httptools says)."""
        pairs = []
        for line in self.raw_head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            pairs.append((name, value.lstrip(b" \t")))
        return pairs

    @property
    def headers(self) -> dict[str, str]:
        """The headers, names lowercased, repeated ones joined with ``", "`` (built when asked for)."""
        headers: dict[str, str] = {}
        for name, value in self.raw_headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        return headers

    # the reader's side
    async def head(self) -> None:
        """Wait for the answer's status and headers (raise the exchange's failure meanwhile)."""
        while not self.headed:
            if self._error is not None:
                raise self.error()
            await self.arrival()

    def answered(self, idle_s: float = 0.0) -> None:
        """The first-byte phase is over: from now on only the total deadline counts (the timer is moved
        to it when the first-byte one would have fired, so an exchange that ends before moves no timer),
        and with ``idle_s`` the idle one: no more than ``idle_s`` between two reads."""
        if self._phase != FIRST_BYTE:
            return
        if idle_s <= 0:
            self._phase = TOTAL
            return
        self._phase = IDLE
        self._idle = idle_s
        self.last_at = now = self._loop.time()
        self._deadline = deadline = min(now + idle_s, self._total_at)
        conn = self.conn
        if conn is not None:
            conn.arm(deadline)  # an earlier first-byte timer is kept: it moves itself here when it fires

    async def read(self) -> bytes:
        """The body bytes that have arrived since the last read, waiting for some; ``b""`` at its end."""
        while (data := self.take()) is None:
            await self.arrival()
        return data

    def take(self) -> bytes | None:
        """``read`` without the wait: the bytes that have arrived (``b""`` at the end), the failure
        raised, or None when there is nothing yet (then await ``arrival()``). What arrived before a
        failure is taken first."""
        buffer = self._buffer
        if buffer:
            data = buffer[0] if len(buffer) == 1 else b"".join(buffer)
            self._buffer = []
            self._buffered = 0
            if self._paused:
                self._resume()
            return data
        if self._error is not None:
            raise self.error()
        return b"" if self.done else None

    def arrival(self) -> asyncio.Future[None]:
        """A future done when more of the answer (or its end, or a failure) arrives; one reader at a
        time. Whoever completes it clears ``_waiter`` first; one a cancelled reader leaves behind is
        done already, and every waker skips a done one."""
        waiter = self._waiter = self._loop.create_future()
        return waiter

    async def read_all(self, cap: int) -> bytes:
        """The whole body; ``BodyTooLarge`` (the connection dropped) once it is past ``cap`` bytes. A
        deadline that passed before the reader got here fails the read, the answer whole or not."""
        while not self.done:
            if self._error is not None:
                raise self.error()
            if self._buffered > cap:
                break
            if self._paused:
                self._resume()
            await self.arrival()
        if self._error is not None:  # the timer fired after the answer came: it emptied the buffer
            raise self.error()
        if self._buffered > cap:
            self.close()
            raise BodyTooLarge(cap)
        buffer = self._buffer
        self._buffer = []
        self._buffered = 0
        return buffer[0] if len(buffer) == 1 else b"".join(buffer)

    def pause(self) -> None:
        """Stop reading the connection until the next ``take`` or ``resume`` (the reader's own
        back-pressure: whoever it relays to is full)."""
        if not self._paused and self.conn is not None and self.conn.transport is not None:
            self._paused = True
            self.conn.transport.pause_reading()

    def resume(self) -> None:
        if self._paused:
            self._resume()

    def error(self) -> HTTPError:
        """A copy of the exchange's failure to raise: the one kept here never gets a traceback, which
        would hold the reader's frame, and so this response, in a cycle."""
        assert self._error is not None
        return copy.copy(self._error)

    @property
    def at_eof(self) -> bool:
        return self.done and not self._buffer

    def release(self) -> None:
        """Done with this answer: the connection goes back to the pool now if the body is over, else
        once the rest has arrived (discarded; dropped past DRAIN_MAX_S or DRAIN_MAX_BYTES)."""
        conn = self.conn
        if conn is None or self._draining:
            return
        self._buffer = []
        self._buffered = 0
        if self._error is not None or not self.keep_alive:
            self.close()
        elif self.done:
            self._cancel_timer()
            self.conn = None
            conn.response = None
            conn.origin.put(conn)
        else:
            self._draining = True
            self._cancel_timer()
            self._timer = self._loop.call_later(DRAIN_MAX_S, self.close)
            if self._paused:
                self._resume()

    def close(self) -> None:
        """Drop the connection (unless already released); idempotent."""
        self._cancel_timer()
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.response = None
            conn.abort()
        waiter = self._waiter
        if waiter is not None:  # a reader still waiting (another task): it sees the end
            self._waiter = None
            if self._error is None:
                self._error = CutShort("response closed")
            if not waiter.done():
                waiter.set_result(None)

    # the connection's side
    def feed(self, data: bytes) -> None:
        if self._draining:
            self._buffered += len(data)
            if self._buffered > DRAIN_MAX_BYTES:
                self.close()
            return
        self._buffer.append(data)
        self._buffered += len(data)
        if self._buffered > HIGH_WATER and not self._paused and self.conn is not None:
            transport = self.conn.transport
            if transport is not None:
                self._paused = True
                transport.pause_reading()
        self.wake()

    def complete(self) -> None:
        self.done = True  # the timer stays armed until release: a late read past the deadline fails
        if self._draining:
            self._cancel_timer()
            conn = self.conn
            self.conn = None
            if conn is not None:
                conn.response = None
                if self.keep_alive:
                    conn.origin.put(conn)
                else:
                    conn.abort()
            return
        self.wake()

    def lost(self, exc: Exception | None) -> None:
        self.conn = None
        self._cancel_timer()
        if self.done:
            return
        if self.headed and self.open_ended and exc is None:
            self.done = True  # a body without a length ends with the connection
        elif self._error is None:
            self._error = CutShort("response cut short") if self.received else lost_error(exc)
        self.wake()

    def fail(self, error: HTTPError) -> None:
        """The exchange failed: the next read raises ``error``; the connection is dropped."""
        if self._error is None:
            self._error = error
        conn, self.conn = self.conn, None
        self._cancel_timer()
        if conn is not None:
            conn.response = None
            conn.abort()
        self.wake()

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def _resume(self) -> None:
        self._paused = False
        self.last_at = self._loop.time()  # the silence while paused was the reader's
        conn = self.conn
        if conn is not None and conn.transport is not None:
            conn.transport.resume_reading()

    def _expire(self) -> None:
        """The deadline in force has passed (the connection's timer says so)."""
        phase = self._phase
        conn = self.conn
        if phase == IDLE and conn is not None:
            now = self._loop.time()
            if self._paused:  # the reader's own back-pressure: not the upstream's silence
                self.last_at = now
            due = self._total_at if self.done else min(self.last_at + self._idle, self._total_at)
            if due > now:
                self._deadline = due
                conn.arm(due)
                return
            self._buffer = []  # what arrived is not read past the deadline
            self._buffered = 0
            self.fail(Timeout(IDLE if due < self._total_at else TOTAL))
            return
        if phase == FIRST_BYTE and conn is not None and self._patience is not None:
            more = self._patience(self._loop.time() - self._started)  # the server reports progress
            if more is not None:
                due = min(self._loop.time() + more, self._total_at)
                if due > self._loop.time():
                    self._deadline = due
                    conn.arm(due)
                    return
        if phase == TOTAL and conn is not None:  # the first-byte deadline, after ``answered()``: the total
            self._phase = _TOTAL_ARMED
            if self._total_at > self._loop.time():
                self._deadline = self._total_at
                conn.arm(self._total_at)
                return
        self._buffer = []  # what arrived is not read past the deadline
        self._buffered = 0
        self.fail(Timeout(FIRST_BYTE if phase == FIRST_BYTE else TOTAL))

    def _cancel_timer(self) -> None:
        timer = self._timer
        if timer is not None:
            self._timer = None
            timer.cancel()
