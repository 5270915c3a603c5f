"""Plain httpx behind the transport border: for debugging, not for serving (``INTERLOCK_TRANSPORT=httpx``).

When an upstream misbehaves, the first question is whether it is our client or the upstream: this row
of ``net/transport.py::TRANSPORTS`` sends the same ``Request`` with httpx (its own pool, HTTP/1.1, no
redirects, no proxy or ``.netrc`` from the environment, ``Accept-Encoding: identity``) and hands back a
``Response`` with the same reading methods, so the adapters, the exchange and the stream relay run
unchanged. It costs several times the own client's CPU per request (bench/upstream_client.py) and keeps
none of its extras: no resend of a request not sent, no stray-byte watch (``resends`` and ``on_stray``
are taken and never called), no ``Idempotency-Key``, no asking a server's patience past the first-byte
deadline.

Deadlines are the request's own: connecting within ``connect_s``, the head before ``first_byte_at``,
then each body read before ``total_at`` (and, once ``answered(idle_s)``, within ``idle_s`` of the last).
Every httpx failure is translated to the ``net/http_errors.py`` tree here (``_ERRORS``), as the own client
raises it, so ``upstream/failures.py`` maps one tree whatever transport runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping

import httpx

from interlock.runtime.net.http_errors import (
    FIRST_BYTE,
    IDLE,
    TOTAL,
    BodyTooLarge,
    ClientClosed,
    ConnectError,
    ConnectTimeout,
    CutShort,
    Disconnected,
    HTTPError,
    InvalidHeader,
    InvalidURL,
    Lost,
    Timeout,
    UnsupportedEncoding,
)
from interlock.runtime.net.transport import Counter, Request

USER_AGENT = "interlock/0.1"

_ERRORS: Mapping[type[Exception], Callable[[], HTTPError]] = {
    httpx.ConnectTimeout: lambda: ConnectTimeout("connect timed out"),
    httpx.ConnectError: lambda: ConnectError("connection refused or unreachable"),
    httpx.TimeoutException: lambda: Timeout(TOTAL),
    httpx.RemoteProtocolError: lambda: Disconnected("server disconnected"),
    httpx.LocalProtocolError: lambda: InvalidHeader("a request header holds a line break or is not Latin-1"),
    httpx.UnsupportedProtocol: lambda: InvalidURL("upstream URL is not http(s)"),
    httpx.DecodingError: lambda: UnsupportedEncoding("response body could not be decoded"),
    httpx.TransportError: lambda: Lost("connection failed mid-exchange"),
    httpx.InvalidURL: lambda: InvalidURL("invalid upstream URL"),
}
"""httpx's exception classes -> ours; the most specific class listed in the exception's MRO wins."""


def translated(exc: Exception) -> HTTPError:
    """The ``net/http_errors.py`` failure for an httpx exception (a ``Lost`` for one not listed)."""
    for cls in type(exc).__mro__:
        make = _ERRORS.get(cls)
        if make is not None:
            return make()
    return Lost("connection failed mid-exchange")


class HttpxTransport:
    """One ``httpx.AsyncClient`` behind ``send``. Build it with ``create()``; close it with ``aclose()``."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.closed = False

    @classmethod
    def create(
        cls,
        *,
        resends: Callable[[str], Counter] | None = None,
        on_stray: Callable[[str, float], None] | None = None,
    ) -> HttpxTransport:
        """An httpx client as the own one is configured (4096 connections, 30 s keep-alive)."""
        limits = httpx.Limits(max_connections=4096, max_keepalive_connections=4096, keepalive_expiry=30.0)
        client = httpx.AsyncClient(limits=limits, follow_redirects=False, trust_env=False, timeout=None)
        return cls(client)

    def time(self) -> float:
        return asyncio.get_running_loop().time()

    async def send(self, request: Request) -> HttpxResponse:
        if self.closed:
            raise ClientClosed("client closed")
        origin = request.origin
        if origin.lines is None:
            raise InvalidHeader("a request header holds a line break or is not Latin-1")
        headers = [("User-Agent", USER_AGENT), ("Accept-Encoding", "identity")]
        headers += list(origin.headers.items())
        headers += list((request.headers or {}).items())
        if request.body is not None:
            headers.append(("Content-Type", "application/json"))
        connect = max(0.0, min(origin.connect_s, request.first_byte_at - self.time()))
        timeout = httpx.Timeout(None, connect=connect)
        try:
            built = self.client.build_request(
                request.method,
                origin.url.rstrip("/") + request.path,
                headers=headers,
                content=request.body,
                timeout=timeout,
            )
            async with asyncio.timeout_at(request.first_byte_at):
                answer = await self.client.send(built, stream=True)
        except TimeoutError:
            raise Timeout(FIRST_BYTE) from None
        except httpx.HTTPError as exc:
            raise translated(exc) from exc
        except (UnicodeEncodeError, ValueError) as exc:  # httpx refuses a header it cannot encode
            raise InvalidHeader("a request header holds a line break or is not Latin-1") from exc
        return HttpxResponse(answer, request.first_byte_at, request.total_at)

    async def aclose(self) -> None:
        self.closed = True
        await self.client.aclose()


class HttpxResponse:
    """An httpx answer read by a task of its own into what the ``Response`` protocol hands out."""

    def __init__(self, answer: httpx.Response, first_byte_at: float, total_at: float) -> None:
        self.answer = answer
        self.status = answer.status_code
        length = answer.headers.get("content-length")
        self.content_length = int(length) if length is not None and length.isdigit() else None
        self.sink: Callable[[bytes], None] | None = None
        self._loop = asyncio.get_running_loop()
        self._buffer: list[bytes] = []
        self._done = False
        self._error: HTTPError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._deadline = first_byte_at
        self._phase = FIRST_BYTE
        self._total_at = total_at
        self._idle = 0.0
        self._timer: asyncio.Timeout | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._pump = self._loop.create_task(self._read_body())

    @property
    def headers(self) -> dict[str, str]:
        return {key: ", ".join(self.answer.headers.get_list(key)) for key in self.answer.headers}

    def answered(self, idle_s: float = 0.0) -> None:
        if self._phase != FIRST_BYTE:
            return
        self._phase, self._idle = (IDLE, idle_s) if idle_s > 0 else (TOTAL, 0.0)
        self._move_deadline()

    def _move_deadline(self) -> None:
        idle = self._idle
        self._deadline = min(self._loop.time() + idle, self._total_at) if idle else self._total_at
        if self._timer is not None:
            self._timer.reschedule(self._deadline)

    async def _read_body(self) -> None:
        chunks: AsyncIterator[bytes] = self.answer.aiter_raw()
        try:
            while True:
                await self._flowing.wait()
                try:
                    async with asyncio.timeout_at(self._deadline) as timer:
                        self._timer = timer
                        data = await anext(chunks)
                except StopAsyncIteration:
                    break
                finally:
                    self._timer = None
                if self._phase == IDLE:
                    self._move_deadline()
                sink = self.sink
                if sink is not None:
                    sink(data)
                else:
                    self._buffer.append(data)
                    self.wake()
            self._done = True
        except TimeoutError:
            self._error = Timeout(self._phase)
        except httpx.RemoteProtocolError:
            self._error = CutShort("response cut short")
        except httpx.HTTPError as exc:
            self._error = translated(exc)
        finally:
            await self.answer.aclose()
            self.wake()

    async def read(self) -> bytes:
        while (data := self.take()) is None:
            await self.arrival()
        return data

    async def read_all(self, cap: int) -> bytes:
        body = bytearray()
        while data := await self.read():
            body += data
            if len(body) > cap:
                self.close()
                raise BodyTooLarge(cap)
        return bytes(body)

    def take(self) -> bytes | None:
        buffer = self._buffer
        if buffer:
            data = b"".join(buffer)
            buffer.clear()
            return data
        if self._error is not None:
            raise self._error
        return b"" if self._done else None

    def arrival(self) -> asyncio.Future[None]:
        waiter = self._waiter = self._loop.create_future()
        if self._buffer or self._done or self._error is not None:
            waiter.set_result(None)
        return waiter

    def wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        if not self._flowing.is_set():
            if self._phase == IDLE:
                self._move_deadline()  # the silence while paused was the reader's
            self._flowing.set()

    def release(self) -> None:
        """The body read to its end goes back to httpx's pool; the rest is dropped with the connection."""
        if not self._done:
            self.close()

    def close(self) -> None:
        if not self._pump.done():
            self._pump.cancel()
        if self._error is None and not self._done:
            self._error = CutShort("response closed")
        self.wake()
