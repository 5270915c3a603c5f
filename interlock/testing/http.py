"""A lean HTTP/1.1 server connection (httptools' parser on an asyncio protocol) for the fake upstreams.

Why not aiohttp.web: measured on the 2-core CI box, an aiohttp low-level server spent ~140 µs of CPU
per request, this protocol ~26 µs (docs/fake-upstreams.md). The benchmark's "fast upstream"
must cost next to nothing beside the gateway it measures. It also gives the fakes exact control over
the socket (abort mid-body, never answer, close listeners). Requests on one connection are handled
one at a time, as HTTP/1.1 clients send them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast

import httptools


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str]  # names lower-cased
    body: bytes


# Handles one request: answers it at once through the connection and returns None, or returns a
# coroutine that will (the connection reads nothing more until that coroutine is done).
Dispatch = Callable[["Connection", Request], Coroutine[Any, Any, None] | None]


_REASONS = {status.value: status.phrase for status in HTTPStatus}


class Connection(asyncio.Protocol):
    """One client connection: parses requests and writes answers, plain or chunked."""

    def __init__(self, dispatch: Dispatch, connections: set[Connection]) -> None:
        self._dispatch = dispatch
        self._connections = connections
        self._parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._keep_alive = True
        self._task: asyncio.Task[None] | None = None

    # ----- asyncio.Protocol -----

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass, but behaves as one
        self._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self)
        self.transport = None
        if self._task is not None:
            self._task.cancel()

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.abort()
        except httptools.HttpParserError:
            self._keep_alive = False
            self.respond(400, b"bad request", "text/plain")

    # ----- httptools callbacks -----

    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = {}
        self._body = []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._keep_alive = bool(self._parser.should_keep_alive())
        path = self._url.split(b"?", 1)[0].decode("latin-1")
        method = self._parser.get_method().decode("latin-1")
        request = Request(method, path, self._headers, b"".join(self._body))
        pending = self._dispatch(self, request)
        if pending is not None and self.transport is not None:
            self.transport.pause_reading()
            self._task = asyncio.get_running_loop().create_task(pending)
            self._task.add_done_callback(self._resume)
        elif pending is not None:
            pending.close()

    def _resume(self, task: asyncio.Task[None]) -> None:
        self._task = None
        if not task.cancelled() and task.exception() is not None:
            self.abort()
        elif self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def watch(self) -> None:
        """Read again while an answer is pending, so a client that closes the connection is seen (a
        stalled answer's wait ends then); reading is paused while a handler runs, which hides a close."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    # ----- writing answers -----

    @property
    def open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def respond(
        self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        """A whole answer with a Content-Length."""
        self._write_head(status, content_type, headers, f"Content-Length: {len(body)}\r\n", body)
        if not self._keep_alive:
            self.close()

    def respond_partial(self, status: int, body: bytes, content_type: str, declared_length: int) -> None:
        """Headers promising ``declared_length`` bytes, then only ``body`` (the caller aborts after)."""
        self._write_head(status, content_type, None, f"Content-Length: {declared_length}\r\n", body)

    def start_chunked(self, status: int, content_type: str) -> None:
        self._write_head(status, content_type, None, "Transfer-Encoding: chunked\r\n", b"")

    def respond_chunked(self, status: int, content_type: str, frames: Iterable[bytes]) -> None:
        """A whole chunked answer in one write, as a fast upstream's burst would arrive."""
        body = b"".join(b"%x\r\n%s\r\n" % (len(d), d) for d in frames if d) + b"0\r\n\r\n"
        self._write_head(status, content_type, None, "Transfer-Encoding: chunked\r\n", body)
        if not self._keep_alive:
            self.close()

    def write_chunk(self, data: bytes) -> None:
        if self.transport is not None and data:
            self.transport.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunked(self) -> None:
        if self.transport is not None:
            self.transport.write(b"0\r\n\r\n")
        if not self._keep_alive:
            self.close()

    def buffered(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _write_head(
        self, status: int, content_type: str, headers: Mapping[str, str] | None, framing: str, body: bytes
    ) -> None:
        if self.transport is None:
            return
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items()) if headers else ""
        close = "" if self._keep_alive else "Connection: close\r\n"
        status_line = f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
        head = f"{status_line}Content-Type: {content_type}\r\n{framing}{extra}{close}\r\n"
        self.transport.write(head.encode("latin-1") + body)
