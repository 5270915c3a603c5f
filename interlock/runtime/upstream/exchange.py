"""One HTTP exchange with an upstream, under the endpoint's three deadlines, errors mapped at the border.

Deadlines, all counted from the moment the request is sent:
- ``connect_s``: the TCP connect and TLS handshake of a new connection (ConnectTimeout);
- ``first_byte_s``: until the answer's headers (non-stream) or its first parsed chunk (stream)
  (FirstByteTimeout) - a primary that accepts and never answers fails here, it does not hang;
- ``idle_s`` (streams, once the first chunk is handed over): the longest silence between two upstream
  reads (IdleTimeout) - a stream that stalls mid-answer ends then, not at ``total_s``;
- ``total_s``: the whole exchange, every later stream chunk included (TotalTimeout).
A first-byte deadline past the total one is cut to it (and then reported as TotalTimeout).

A stream is handed over only once it has said something (``substantive``): text, reasoning, a tool
call, a finish reason or usage. The preamble before that (a role-only delta, empty content) is held
back, so an upstream that sends a role chunk and then ends, errs or is cut (llama.cpp's server cut a
running stream to a role chunk and ``[DONE]`` when a second request came in) fails before the first
byte reaches the client, and the router can still fall back.

Sizes, from the plan (``endpoint.max_body_bytes``, ``endpoint.max_line_bytes``): a non-streamed answer
longer than the first (by Content-Length, or counted while reading) and a stream line longer than the
second are a ProtocolFailure of that candidate, and the connection is dropped. An upstream that sends
an endless body or line costs at most that much memory, never the gateway.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol

from interlock.runtime.base.asgi import json_object
from interlock.runtime.base.errors import (
    FirstByteTimeout,
    IdleTimeout,
    MalformedResponse,
    ProtocolFailure,
    TotalTimeout,
    UpstreamError,
)
from interlock.runtime.net.http_errors import FIRST_BYTE, IDLE, BodyTooLarge, Timeout
from interlock.runtime.net.transport import Request, Response, Transport
from interlock.runtime.upstream.base import UPSTREAM_HEADERS
from interlock.runtime.upstream.failures import CLIENT_EXCEPTIONS, map_exception
from interlock.runtime.wire.base import ChatStream, Endpoint
from interlock.runtime.wire.error_bodies import credentials, error_for_status

MAX_ERROR_BODY = 64 * 1024
_FAILURES: tuple[type[BaseException], ...] = (UpstreamError, *CLIENT_EXCEPTIONS)  # a read that fails closes


class LineDecoder(Protocol):
    """Turns an upstream's stream, one line at a time, into ``chat.completion.chunk`` dicts."""

    done: bool  # the upstream's last chunk has been read

    def feed(self, line: bytes, out: deque[dict[str, Any]]) -> None:
        """Decode one line (without its ``\\n``); append finished chunks to ``out``; raise UpstreamError."""

    def whole(self, data: bytes, out: deque[dict[str, Any]]) -> bool:
        """A read that is one whole record of the format on its own (the usual read of a stream that
        trickles), nothing of an earlier one pending: decoded as ``feed`` would, in one step. False
        for any other read (nothing done: it is fed line by line)."""

    def end(self, out: deque[dict[str, Any]]) -> None:
        """The body ended: flush what is pending, or raise ProtocolFailure if the stream was cut."""


_SAYS = ("content", "reasoning", "reasoning_content", "tool_calls", "function_call", "refusal")


def substantive(chunk: Mapping[str, Any]) -> bool:
    """Whether a ``chat.completion.chunk`` says anything: usage, a finish reason, or a delta with text,
    reasoning, tool calls or a refusal (a role-only delta, or empty content, is preamble)."""
    if chunk.get("usage"):
        return True
    choices = chunk.get("choices")
    if type(choices) is not list:
        return False
    for choice in choices:
        if type(choice) is not dict:
            continue
        if choice.get("finish_reason"):
            return True
        delta = choice.get("delta")
        if type(delta) is dict and any(delta.get(name) for name in _SAYS):
            return True
    return False


def _timed_out(phase: str, endpoint: Endpoint) -> UpstreamError:
    if phase == FIRST_BYTE and endpoint.first_byte_s <= endpoint.total_s:
        return FirstByteTimeout(f"no answer within {endpoint.first_byte_s:g} s")
    if phase == IDLE:
        return IdleTimeout(f"the stream said nothing for {endpoint.idle_s:g} s")
    return TotalTimeout(f"exchange exceeded {endpoint.total_s:g} s")


def _mapped(exc: BaseException, endpoint: Endpoint) -> UpstreamError:
    """The UpstreamError for a client failure: a deadline names its own seconds."""
    if isinstance(exc, Timeout):
        return _timed_out(exc.phase, endpoint)
    if isinstance(exc, BodyTooLarge):
        return ProtocolFailure(f"answer is over the {exc.cap}-byte limit")
    return map_exception(exc)


def _line_too_long(cap: int) -> ProtocolFailure:
    return ProtocolFailure(f"stream line is over the {cap}-byte limit")


async def _start(
    client: Transport,
    endpoint: Endpoint,
    method: str,
    path: str,
    payload: bytes | None,
) -> Response:
    """Send the request to ``path`` under the endpoint's URL, its deadlines counted from now; return a
    2xx response or raise the mapped error for any other status."""
    now = client.time()
    total_at = now + endpoint.total_s
    first_byte_at = now + endpoint.first_byte_s
    if first_byte_at > total_at:
        first_byte_at = total_at
    traced = UPSTREAM_HEADERS.get()  # a traced attempt's traceparent; None unless --otel
    request = Request(endpoint, method, path, payload, first_byte_at, total_at, now, traced)
    response = await client.send(request)
    if 200 <= response.status < 300:
        return response
    try:
        body = await response.read_all(MAX_ERROR_BODY)
    except BodyTooLarge:
        body = b""  # an error body past the cap: the status says enough
    finally:
        response.release()
    raise error_for_status(response.status, response.headers, body, credentials(endpoint.headers))


def probe_endpoint(endpoint: Endpoint, timeout_s: float) -> Endpoint:
    """The endpoint with every deadline cut to a probe's own timeout."""
    return dataclasses.replace(
        endpoint, connect_s=min(endpoint.connect_s, timeout_s), first_byte_s=timeout_s, total_s=timeout_s
    )


async def request_json(
    client: Transport, endpoint: Endpoint, method: str, path: str, payload: bytes | None
) -> dict[str, Any]:
    """A non-streaming exchange: the JSON object a 2xx answer must be (else ``MalformedResponse``)."""
    return json_object(
        await request_bytes(client, endpoint, method, path, payload), MalformedResponse, "response"
    )


async def request_bytes(
    client: Transport, endpoint: Endpoint, method: str, path: str, payload: bytes | None
) -> bytes:
    """A non-streaming exchange: the body of a 2xx answer, as it came (a ``/metrics`` text, say); past
    ``endpoint.max_body_bytes`` a ProtocolFailure (the connection dropped)."""
    try:
        response = await _start(client, endpoint, method, path, payload)
        response.answered()
        cap = endpoint.max_body_bytes
        declared = response.content_length
        if declared is not None and declared > cap:
            response.close()
            raise ProtocolFailure(f"answer of {declared} bytes is over the {cap}-byte limit")
        try:
            data = await response.read_all(cap)
        except BaseException:
            response.close()
            raise
        response.release()
    except UpstreamError:
        raise
    except CLIENT_EXCEPTIONS as exc:
        raise _mapped(exc, endpoint) from exc
    return data


async def request_stream(
    client: Transport, endpoint: Endpoint, path: str, payload: bytes, decoder: LineDecoder
) -> LineStream:
    """Start a streaming exchange; return once the first chunk has been decoded."""
    stream: LineStream | None = None
    try:
        response = await _start(client, endpoint, "POST", path, payload)
        stream = LineStream(response, decoder, endpoint)
        await stream.prime()
    except BaseException as exc:
        if stream is not None:
            await stream.aclose()
        if isinstance(exc, UpstreamError):
            raise
        if isinstance(exc, CLIENT_EXCEPTIONS):
            raise _mapped(exc, endpoint) from exc
        raise
    response.answered(endpoint.idle_s)
    return stream


class LineStream(ChatStream):
    """A streamed answer read line by line; its first chunk is decoded before the caller gets it.

    After the first chunk, the idle and total deadlines are the response's one timer for the whole
    stream, not a timeout per read: when one passes, the next read raises IdleTimeout or TotalTimeout.
    """

    __slots__ = (
        "_broken",
        "_closed",
        "_decoder",
        "_endpoint",
        "_error",
        "_full",
        "_pending",
        "_response",
        "_sink",
        "_tail",
    )

    def __init__(self, response: Response, decoder: LineDecoder, endpoint: Endpoint) -> None:
        self._response = response
        self._decoder = decoder
        self._endpoint = endpoint
        self._pending: deque[dict[str, Any]] = deque()
        self._tail = b""
        self._error: UpstreamError | None = None
        self._closed = False
        self._sink: Callable[[deque[dict[str, Any]]], bool] | None = None  # while ``relay`` runs
        self._full = False  # the sink said its caller's connection is full
        self._broken: Exception | None = None  # the sink failed (a bug): ``relay`` raises it

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._pending:
            return self._pending.popleft()
        if self._closed and self._error is None:
            raise StopAsyncIteration
        await self._fill_or_close()
        if self._pending:
            return self._pending.popleft()
        raise StopAsyncIteration

    async def read(self) -> deque[dict[str, Any]]:
        """Every chunk decoded from the reads so far (the first one's chunks, later one read's), or an
        empty deque at the end: one await per upstream read, not one per chunk.

        (``fill`` inline, waiting on the response's future itself: this runs once per stream chunk.)"""
        pending = self._pending
        if not pending:
            if self._closed and self._error is None:
                return pending
            response = self._response
            try:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                while True:
                    data = response.take()
                    if data is None:
                        await response.arrival()
                    elif self._decode(data, False):
                        break
            except _FAILURES as exc:
                await self.aclose()
                if isinstance(exc, UpstreamError):
                    raise
                raise _mapped(exc, self._endpoint) from exc
        self._pending = deque()
        return pending

    async def relay(
        self, sink: Callable[[deque[dict[str, Any]]], bool], drain: Callable[[], Awaitable[None]]
    ) -> None:
        """Hand every chunk to ``sink`` until the stream is over; its failures are ``read``'s.

        Once what has arrived is handed over, the connection hands each later read to this stream in
        its own read callback, decoded and passed to ``sink`` there: no task switch per chunk. The
        task waits only for the end, a failure, or a full caller (``sink`` returned True): then the
        upstream is not read until ``drain()`` returns."""
        response = self._response
        try:
            while True:
                pending = self._pending
                if pending:
                    self._pending = deque()
                    if sink(pending):
                        await drain()
                    continue
                if self._broken is not None:
                    raise self._broken
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                if self._closed:
                    return
                data = response.take()
                if data is not None:
                    self._decode(data, False)
                    continue
                self._sink, response.sink = sink, self._pushed
                try:
                    await response.arrival()
                finally:
                    self._sink = response.sink = None
                if self._full:
                    self._full = False
                    await drain()
                    response.resume()
        except _FAILURES as exc:
            await self.aclose()
            if isinstance(exc, UpstreamError):
                raise
            raise _mapped(exc, self._endpoint) from exc

    def _pushed(self, data: bytes) -> None:
        """Body bytes, in the connection's read callback while ``relay`` waits: decoded, the chunks
        handed to the sink at once. The end, a failure, a full sink: the relay's task is woken."""
        sink, pending = self._sink, self._pending
        assert sink is not None
        try:
            self._decode(data, False)
            if pending:
                try:
                    self._full = sink(pending)
                finally:
                    pending.clear()  # the sink's only during the call: no deque per read
        except UpstreamError as failed:
            self._error = failed
        except Exception as exc:  # the sink's own failure (a bug): raised by the relay's task
            self._broken = exc
        if self._full or self._closed or self._error is not None or self._broken is not None:
            response = self._response
            response.sink = None  # what arrives now is buffered, for the task to read
            if self._full:
                response.pause()
            response.wake()

    async def _fill_or_close(self) -> None:
        """One more upstream read; a failure closes the stream and leaves as an ``UpstreamError``."""
        try:
            await self.fill()
        except _FAILURES as exc:
            await self.aclose()
            if isinstance(exc, UpstreamError):
                raise
            raise _mapped(exc, self._endpoint) from exc

    @property
    def prompt_tokens(self) -> int | None:
        tokens = getattr(self._decoder, "prompt_tokens", None)  # only decoders whose format says it early
        return tokens if isinstance(tokens, int) else None

    async def prime(self) -> None:
        """The first reads: until a chunk says something (``substantive``); the preamble before it is
        kept for the caller. Any failure meanwhile raises at once, preamble or not: nothing was sent."""
        try:
            await self.fill(priming=True)
        except BaseException:
            self._pending.clear()
            raise
        if self._error is not None and not any(map(substantive, self._pending)):
            error, self._error = self._error, None  # only preamble before it: still before any byte
            self._pending.clear()
            raise error

    async def fill(self, *, priming: bool = False) -> None:
        """Read until a chunk is pending (``priming``: a substantive one) or the upstream's stream is
        over (then release the connection).

        An error decoded after chunks that arrived in the same read waits until those are yielded.
        """
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        pending, response = self._pending, self._response
        if self._decoder.done:
            self._release()
            return
        if any(map(substantive, pending)) if priming else pending:
            return
        while not self._decode(await response.read(), priming):
            pass

    def _decode(self, data: bytes, priming: bool) -> bool:
        """Decode one upstream read (``b""``: the body's end) into ``_pending``; whether to stop reading:
        a chunk is pending (``priming``: a substantive one), the stream is over (the connection then
        released), or an error waits behind the chunks pending."""
        decoder, pending = self._decoder, self._pending
        try:
            if not data:
                if self._tail:
                    decoder.feed(self._tail, pending)
                    self._tail = b""
                decoder.end(pending)
                if decoder.done or not pending:
                    self._release()
                return True
            cap = self._endpoint.max_line_bytes
            if self._tail:
                data = self._tail + data
            elif len(data) <= cap and decoder.whole(data, pending):
                data = b""  # decoded: no lines left
            if data:
                lines = data.split(b"\n")
                self._tail = tail = lines.pop()
                for line in lines:
                    if len(line) > cap:
                        raise _line_too_long(cap)
                    decoder.feed(line, pending)
                    if decoder.done:
                        break
                if len(tail) > cap and not decoder.done:
                    raise _line_too_long(cap)
        except UpstreamError as exc:
            if not pending:
                raise
            self._error = exc
            return True
        if decoder.done:
            self._release()
            return True
        return any(map(substantive, pending)) if priming else bool(pending)

    def _release(self) -> None:
        """Back to the pool: now when the body is fully read, else once its end arrives (the response
        discards the rest meanwhile)."""
        if not self._closed:
            self._closed = True
            self._response.release()

    async def aclose(self) -> None:
        """Drop the connection (unless already released) and end the iteration; idempotent."""
        self._pending.clear()
        self._error = None
        if not self._closed:
            self._closed = True
            self._response.close()
