"""The life of a fake upstream: a real aiohttp server on 127.0.0.1 with injectable faults.

A fake runs in the caller's event loop (``async with FakeOpenAI() as fake``) or in a thread of its own
(``with FakeOpenAI() as fake`` / ``fake.start()`` ... ``fake.stop()``), always on an ephemeral port.
Subclasses only say what to answer (sync route functions returning an ``Answer``); this module sends
it and applies the fault in force, so every wire format gets the same faults.

Control routes under ``/_fake/`` let another process steer a fake started with ``python -m``.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import orjson
from aiohttp import web

from interlock.testing.faults import Fault, FaultBoard, FaultKind
from interlock.testing.replies import Reply

_JSON = "application/json"


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as the fake received it. Header names are lower-cased; ``body`` is the parsed JSON."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


@dataclass(frozen=True, slots=True)
class Incoming:
    """What a route function sees of a request."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    model: str | None


@dataclass(frozen=True, slots=True)
class JsonAnswer:
    obj: Any
    status: int = 200


@dataclass(frozen=True, slots=True)
class StreamAnswer:
    """A streamed 200: ``frames`` are wire-ready chunks, ``trailer`` (e.g. ``data: [DONE]``) ends them."""

    content_type: str
    frames: Sequence[bytes]
    trailer: bytes = b""


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    status: int
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)


Answer = JsonAnswer | StreamAnswer | ErrorAnswer
Route = Callable[[Incoming], Answer]


class FakeServer:
    """Base of the fakes: lifecycle, request recording, fault switches, and sending answers."""

    kind = "fake"

    def __init__(
        self, *, name: str | None = None, reply: Reply | None = None, record: bool = True, port: int = 0
    ) -> None:
        self.name = name or self.kind
        self.faults = FaultBoard()
        self.reply = reply or Reply()
        self.record = record
        self._requested_port = port
        self._host = "127.0.0.1"
        self._port = 0
        self._recorded: collections.deque[RecordedRequest] = collections.deque(maxlen=10_000)
        self._routes: dict[tuple[str, str], Route] = self.routes()
        self._control: dict[tuple[str, str], Route] = {
            ("POST", "/_fake/fault"): self._control_fault,
            ("POST", "/_fake/clear"): self._control_clear,
            ("GET", "/_fake/requests"): self._control_requests,
        }
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._lowlevel: web.Server | None = None
        self._listener: asyncio.AbstractServer | None = None
        self._relisten: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None

    # ----- what subclasses provide -----

    def routes(self) -> dict[tuple[str, str], Route]:
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> bytes:
        """An error body in the upstream's own shape."""
        raise NotImplementedError

    def malformed_frame(self) -> bytes:
        """A stream chunk whose payload is not JSON."""
        raise NotImplementedError

    def error_frame(self, message: str) -> bytes:
        """An error reported inside a 200 stream."""
        raise NotImplementedError

    # ----- what tests use -----

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        if not self._port:
            raise RuntimeError(f"{self.name} is not started")
        return f"http://{self._host}:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (the last 10,000), control routes excluded."""
        return list(self._recorded)

    def clear_requests(self) -> None:
        self._recorded.clear()

    def set_fault(self, fault: Fault, *, model: str | None = None, times: int | None = None) -> None:
        self.faults.set(fault, model=model, times=times)

    def clear_faults(self, *, model: str | None = None) -> None:
        self.faults.clear(model=model)

    def refuse_connections(self) -> None:
        """Stop listening and drop every open connection: connecting is refused until re-enabled."""
        self._in_loop(self._refuse)

    def accept_connections(self) -> None:
        """Listen again on the same port."""
        self._in_loop(self._accept)

    # ----- lifecycle: in the caller's loop -----

    async def astart(self) -> Self:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._lowlevel = web.Server(self._handle, handler_cancellation=True, access_log=None)
        sock = _listening_socket(self._host, self._requested_port)
        self._port = sock.getsockname()[1]
        self._listener = await self._loop.create_server(self._lowlevel, sock=sock)
        return self

    async def aclose(self) -> None:
        if self._loop is None or self._stopping is None or self._lowlevel is None:
            return
        self._stopping.set()
        if self._relisten is not None:
            await asyncio.gather(self._relisten, return_exceptions=True)
        self._refuse()
        await self._lowlevel.shutdown(1.0)
        self._loop = None

    async def __aenter__(self) -> Self:
        return await self.astart()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # ----- lifecycle: in a thread of its own -----

    def start(self, timeout_s: float = 10.0) -> Self:
        """Serve from a background thread with its own event loop; returns once listening."""
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        loop = asyncio.new_event_loop()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.astart())
            except BaseException as exc:
                started.set_exception(exc)
                loop.close()
                return
            started.set_result(None)
            loop.run_forever()
            loop.run_until_complete(self.aclose())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=serve, name=f"{self.name}-server", daemon=True)
        self._thread.start()
        started.result(timeout_s)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_s)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ----- internals -----

    def _in_loop(self, fn: Callable[[], None]) -> None:
        loop = self._loop
        if loop is None:
            raise RuntimeError(f"{self.name} is not started")
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn()
            return
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def call() -> None:
            try:
                fn()
            except BaseException as exc:
                done.set_exception(exc)
            else:
                done.set_result(None)

        loop.call_soon_threadsafe(call)
        done.result(10.0)

    def _refuse(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._lowlevel is not None:
            for handler in self._lowlevel.connections:
                if handler.transport is not None:
                    handler.transport.abort()

    def _accept(self) -> None:
        if self._listener is not None or self._loop is None or self._lowlevel is None:
            return
        sock = _listening_socket(self._host, self._port)  # listening now; accepted once registered
        self._relisten = self._loop.create_task(self._register(sock, self._lowlevel))

    async def _register(self, sock: socket.socket, lowlevel: web.Server) -> None:
        assert self._loop is not None
        self._listener = await self._loop.create_server(lowlevel, sock=sock)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        raw = await request.read() if request.body_exists else b""
        body: Any = None
        bad_json = False
        if raw:
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                bad_json = True
        key = (request.method, request.path)
        control = self._control.get(key)
        if control is not None:
            return await self._send(request, control(_incoming(request, body, None)), None)
        if self.record:
            headers = {k.lower(): v for k, v in request.headers.items()}
            self._recorded.append(RecordedRequest(request.method, request.path, headers, body))
        route = self._routes.get(key)
        if route is None:
            return await self._send(request, ErrorAnswer(404, f"no route for {key[0]} {key[1]}"), None)
        if bad_json:
            return await self._send(request, ErrorAnswer(400, "request body is not valid JSON"), None)
        model = body.get("model") if isinstance(body, dict) else None
        model = model if isinstance(model, str) else None
        fault = self.faults.take(model)
        if fault is not None:
            early = await self._early_fault(request, fault)
            if early is not None:
                return early
        return await self._send(request, route(_incoming(request, body, model)), fault)

    async def _early_fault(self, request: web.BaseRequest, fault: Fault) -> web.StreamResponse | None:
        """Faults that replace the answer outright; None when the answer still goes out."""
        if fault.kind is FaultKind.HANG:
            assert self._stopping is not None
            await self._stopping.wait()
            return _aborted(request)
        if fault.kind is FaultKind.SLOW_FIRST_BYTE:
            await asyncio.sleep(fault.delay_s)
            return None
        if fault.kind is FaultKind.DISCONNECT:
            return _aborted(request)
        if fault.kind is FaultKind.STATUS:
            headers = {}
            if fault.retry_after is not None:
                headers["Retry-After"] = fault.retry_after
            if fault.retry_after_ms is not None:
                headers["retry-after-ms"] = fault.retry_after_ms
            if fault.body is not None:
                return web.Response(status=fault.status, body=fault.body, headers=headers)
            return await self._send(request, ErrorAnswer(fault.status, fault.message, headers), None)
        return None

    async def _send(
        self, request: web.BaseRequest, answer: Answer, fault: Fault | None
    ) -> web.StreamResponse:
        if isinstance(answer, ErrorAnswer):
            return web.Response(
                status=answer.status,
                body=self.error_body(answer.status, answer.message),
                content_type=_JSON,
                headers=answer.headers,
            )
        if isinstance(answer, JsonAnswer):
            return await self._send_json(request, answer, fault)
        return await self._send_stream(request, answer, fault)

    async def _send_json(
        self, request: web.BaseRequest, answer: JsonAnswer, fault: Fault | None
    ) -> web.StreamResponse:
        data = orjson.dumps(answer.obj)
        if fault is None:
            return web.Response(status=answer.status, body=data, content_type=_JSON)
        if fault.kind is FaultKind.MALFORMED:
            return web.Response(status=answer.status, body=data[: len(data) // 2], content_type=_JSON)
        if fault.kind is FaultKind.CUT_STREAM:
            response = web.StreamResponse(status=answer.status, headers={"Content-Type": _JSON})
            response.content_length = len(data)
            await response.prepare(request)
            await response.write(data[: len(data) // 2])
            return await _flushed_abort(request, response)
        if fault.kind is FaultKind.STREAM_ERROR:
            return await self._send(request, ErrorAnswer(500, fault.message), None)
        return web.Response(status=answer.status, body=data, content_type=_JSON)

    async def _send_stream(
        self, request: web.BaseRequest, answer: StreamAnswer, fault: Fault | None
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers={"Content-Type": answer.content_type})
        await response.prepare(request)
        delay = self.reply.chunk_delay_s
        cut_at = (
            fault.after_chunks if fault is not None and fault.kind is not FaultKind.SLOW_FIRST_BYTE else -1
        )
        for index, frame in enumerate(answer.frames):
            if index == cut_at:
                return await self._stream_fault(request, response, fault)
            if delay and index:
                await asyncio.sleep(delay)
            await response.write(frame)
        if cut_at >= len(answer.frames):
            return await self._stream_fault(request, response, fault)
        if answer.trailer:
            await response.write(answer.trailer)
        await response.write_eof()
        return response

    async def _stream_fault(
        self, request: web.BaseRequest, response: web.StreamResponse, fault: Fault | None
    ) -> web.StreamResponse:
        assert fault is not None
        if fault.kind is FaultKind.CUT_STREAM:
            return await _flushed_abort(request, response)
        if fault.kind is FaultKind.MALFORMED:
            await response.write(self.malformed_frame())
        elif fault.kind is FaultKind.STREAM_ERROR:
            await response.write(self.error_frame(fault.message))
        await response.write_eof()
        return response

    # ----- control routes -----

    def _control_fault(self, incoming: Incoming) -> Answer:
        spec = dict(incoming.body) if isinstance(incoming.body, dict) else {}
        model, times = spec.pop("model", None), spec.pop("times", None)
        if isinstance(spec.get("body"), str):
            spec["body"] = spec["body"].encode()
        try:
            fault = Fault(kind=FaultKind(spec.pop("kind")), **spec)
        except (KeyError, TypeError, ValueError) as exc:
            return ErrorAnswer(400, f"bad fault: {exc}")
        self.faults.set(fault, model=model, times=times)
        return JsonAnswer({"ok": True})

    def _control_clear(self, incoming: Incoming) -> Answer:
        body = incoming.body if isinstance(incoming.body, dict) else {}
        self.faults.clear(model=body.get("model"))
        if body.get("requests"):
            self.clear_requests()
        return JsonAnswer({"ok": True})

    def _control_requests(self, incoming: Incoming) -> Answer:
        return JsonAnswer(
            [
                {"method": r.method, "path": r.path, "headers": r.headers, "body": r.body}
                for r in self._recorded
            ]
        )


def _incoming(request: web.BaseRequest, body: Any, model: str | None) -> Incoming:
    return Incoming(request.method, request.path, request.headers, body, model)


def _listening_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def _aborted(request: web.BaseRequest) -> web.StreamResponse:
    if request.transport is not None:
        request.transport.abort()
    return web.Response()  # never sent: aiohttp sees the closed transport and drops it quietly


async def _flushed_abort(request: web.BaseRequest, response: web.StreamResponse) -> web.StreamResponse:
    """Abort the connection once what was written has left, so the client sees those bytes, then a reset."""
    transport = request.transport
    if transport is not None:
        for _ in range(1000):
            if transport.get_write_buffer_size() == 0:
                break
            await asyncio.sleep(0.001)
        transport.abort()
    return response
