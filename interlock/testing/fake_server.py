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
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import orjson

from interlock.testing.faults import Fault, FaultBoard, FaultKind
from interlock.testing.http import Connection, Request
from interlock.testing.replies import Reply

_JSON = "application/json"


@dataclass(frozen=True, slots=True)
class Incoming:
    """A request as the fake received it, recorded and handed to route functions. Header names are
    lower-cased; ``body`` is the parsed JSON (None when absent or invalid); ``model`` is the body's
    ``model`` when that is a string."""

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


@dataclass(slots=True)
class StreamCount:
    """How the fake's streamed answers ended, so a test can prove the gateway closed every one.

    ``cut``: the connection was lost before the last chunk was written (the client left, or a fault
    cut it); ``open``: started and not yet ended either way. Updated on the fake's loop only.
    """

    started: int = 0
    finished: int = 0
    cut: int = 0

    @property
    def open(self) -> int:
        return self.started - self.finished - self.cut

    def as_dict(self) -> dict[str, int]:
        return {"started": self.started, "finished": self.finished, "cut": self.cut, "open": self.open}


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
        self._recorded: collections.deque[Incoming] = collections.deque(maxlen=10_000)
        self._routes: dict[tuple[str, str], Route] = self.routes()
        self._control: dict[tuple[str, str], Route] = {
            ("POST", "/_fake/fault"): self._control_fault,
            ("POST", "/_fake/clear"): self._control_clear,
            ("GET", "/_fake/requests"): self._control_requests,
            ("POST", "/_fake/requests/clear"): self._control_clear_requests,
            ("GET", "/_fake/streams"): self._control_streams,
        }
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._connections: set[Connection] = set()
        self.connections_opened = 0  # TCP connections accepted so far (keep-alive shows as reuse)
        self.streams = StreamCount()
        self.in_flight = 0  # requests being answered slowly (a fault, a paced stream) right now
        self.peak_in_flight = 0  # the most there ever were at once (``clear_requests`` resets it)
        self._listener: asyncio.AbstractServer | None = None
        self._relisten: asyncio.Task[None] | None = None
        self._held: socket.socket | None = None  # while refusing: the port, bound but not listening
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
    def requests(self) -> list[Incoming]:
        """Every request received so far (the last 10,000), control routes excluded."""
        return list(self._recorded)

    def clear_requests(self) -> None:
        self._recorded.clear()
        self.peak_in_flight = self.in_flight

    def set_fault(self, fault: Fault, *, model: str | None = None, times: int | None = None) -> None:
        self.faults.set(fault, model=model, times=times)

    def clear_faults(self, *, model: str | None = None) -> None:
        self.faults.clear(model=model)

    @property
    def open_connections(self) -> int:
        """TCP connections open now (an aborted one counts until its handler saw connection_lost)."""
        return len(self._connections)

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
        sock = _listening_socket(self._host, self._requested_port)
        self._port = sock.getsockname()[1]
        self._listener = await self._loop.create_server(self._protocol, sock=sock)
        return self

    async def aclose(self) -> None:
        if self._loop is None or self._stopping is None:
            return
        self._stopping.set()
        if self._relisten is not None:
            await asyncio.gather(self._relisten, return_exceptions=True)
        self._refuse()
        self._release()
        await asyncio.sleep(0)  # let the aborted connections' handlers see connection_lost
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
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
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
            if self._stopping is None or not self._stopping.is_set():
                self._held = _held_port(self._host, self._port)
        for conn in list(self._connections):
            conn.abort()

    def _release(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    def _accept(self) -> None:
        if self._listener is not None or self._loop is None:
            return
        self._release()
        sock = _listening_socket(self._host, self._port)  # listening now; accepted once registered
        self._relisten = self._loop.create_task(self._register(sock))

    async def _register(self, sock: socket.socket) -> None:
        assert self._loop is not None
        self._listener = await self._loop.create_server(self._protocol, sock=sock)

    def _protocol(self) -> Connection:
        self.connections_opened += 1
        return Connection(self._dispatch, self._connections)

    def _dispatch(self, conn: Connection, request: Request) -> Coroutine[Any, Any, None] | None:
        body: Any = None
        bad_json = False
        if request.body:
            try:
                body = orjson.loads(request.body)
            except orjson.JSONDecodeError:
                bad_json = True
        key = (request.method, request.path)
        model = body.get("model") if isinstance(body, dict) else None
        incoming = Incoming(*key, request.headers, body, model if isinstance(model, str) else None)
        control = self._control.get(key)
        if control is not None:
            return self._send(conn, control(incoming), None)
        if self.record:
            self._recorded.append(incoming)
        route = self._routes.get(key)
        if route is None:
            return self._send(conn, ErrorAnswer(404, f"no route for {key[0]} {key[1]}"), None)
        if bad_json:
            return self._send(conn, ErrorAnswer(400, "request body is not valid JSON"), None)
        fault = self.faults.take(incoming.model)
        if fault is None:
            pending = self._send(conn, route(incoming), None)
            return None if pending is None else self._counted(pending)
        return self._counted(self._faulty(conn, fault, route, incoming))

    async def _counted(self, pending: Coroutine[Any, Any, None]) -> None:
        """Answer, counted in ``in_flight`` until the answer is over (or the connection is)."""
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            await pending
        finally:
            self.in_flight -= 1

    async def _faulty(self, conn: Connection, fault: Fault, route: Route, incoming: Incoming) -> None:
        """Answer under a fault; runs as a task (the connection reads nothing more meanwhile)."""
        kind = fault.kind
        if kind is FaultKind.HANG:
            assert self._stopping is not None
            await self._stopping.wait()
            conn.abort()
        elif kind is FaultKind.HOLD:
            assert fault.gate is not None
            assert self._stopping is not None
            while not fault.gate.is_set():  # a threading.Event, set by the test's thread: polled
                if self._stopping.is_set():
                    conn.abort()
                    return
                await asyncio.sleep(0.01)
            await self._finish(self._send(conn, route(incoming), None))
        elif kind is FaultKind.DISCONNECT:
            conn.abort()
        elif kind is FaultKind.STATUS:
            headers = {}
            if fault.retry_after is not None:
                headers["Retry-After"] = fault.retry_after
            if fault.retry_after_ms is not None:
                headers["retry-after-ms"] = fault.retry_after_ms
            if fault.body is not None:
                conn.respond(fault.status, fault.body, fault.content_type, headers)
            else:
                await self._finish(self._send(conn, ErrorAnswer(fault.status, fault.message, headers), None))
        elif kind is FaultKind.ENDLESS:
            await self._endless(conn, route(incoming), fault)
        elif kind is FaultKind.RECORDED:
            assert fault.body is not None
            conn.respond(200, fault.body, fault.content_type)
        elif kind is FaultKind.TRICKLE:
            await self._trickle(conn, route(incoming), fault.delay_s)
        else:
            if kind is FaultKind.SLOW_FIRST_BYTE:
                await asyncio.sleep(fault.delay_s)
            await self._finish(self._send(conn, route(incoming), fault))

    async def _endless(self, conn: Connection, answer: Answer, fault: Fault) -> None:
        """A chunked 200 that never ends: a JSON body (or, in a stream, the line after ``after_chunks``
        chunks) that keeps growing as fast as the client reads, until it closes the connection."""
        if isinstance(answer, ErrorAnswer):
            await self._finish(self._send(conn, answer, None))
            return
        assert self._stopping is not None
        if isinstance(answer, StreamAnswer):
            conn.start_chunked(200, answer.content_type)
            for frame in answer.frames[: fault.after_chunks]:
                conn.write_chunk(frame)
            sse = answer.content_type.startswith("text/event-stream")
            conn.write_chunk(b'data: {"endless": "' if sse else b'{"endless": "')
        else:
            conn.start_chunked(200, _JSON)
            conn.write_chunk(b'{"endless": "')
        filler = b"x" * 65536
        while conn.open and not self._stopping.is_set():
            conn.write_chunk(filler)
            await _drained(conn, 4 * len(filler))
        conn.abort()

    async def _trickle(self, conn: Connection, answer: Answer, delay_s: float) -> None:
        """The answer's body a byte at a time, ``delay_s`` apart, until it ends or the client leaves."""
        if isinstance(answer, ErrorAnswer):
            await self._finish(self._send(conn, answer, None))
            return
        assert self._stopping is not None
        if isinstance(answer, JsonAnswer):
            content_type, data = _JSON, orjson.dumps(answer.obj)
        else:
            content_type, data = answer.content_type, b"".join([*answer.frames, answer.trailer])
        conn.start_chunked(200, content_type)
        for index in range(len(data)):
            if not conn.open or self._stopping.is_set():
                conn.abort()
                return
            conn.write_chunk(data[index : index + 1])
            await asyncio.sleep(delay_s)
        conn.end_chunked()

    @staticmethod
    async def _finish(pending: Coroutine[Any, Any, None] | None) -> None:
        if pending is not None:
            await pending

    def _send(
        self, conn: Connection, answer: Answer, fault: Fault | None
    ) -> Coroutine[Any, Any, None] | None:
        """Write ``answer`` now, or return a coroutine that will (delays, cut connections)."""
        if isinstance(answer, ErrorAnswer):
            conn.respond(answer.status, self.error_body(answer.status, answer.message), _JSON, answer.headers)
            return None
        if isinstance(answer, JsonAnswer):
            data = orjson.dumps(answer.obj)
            kind = fault.kind if fault is not None else None
            if kind is FaultKind.MALFORMED or kind is FaultKind.TRUNCATE or kind is FaultKind.UNFINISHED:
                conn.respond(answer.status, data[: len(data) // 2], _JSON)
            elif kind is FaultKind.CUT_STREAM:
                conn.respond_partial(answer.status, data[: len(data) // 2], _JSON, len(data))
                return _flushed_abort(conn)
            elif kind is FaultKind.STREAM_ERROR:
                conn.respond(500, self.error_body(500, fault.message if fault else ""), _JSON)
            else:
                conn.respond(answer.status, data, _JSON)
            return None
        cut_at = -1
        if fault is not None and fault.kind is not FaultKind.SLOW_FIRST_BYTE:
            cut_at = fault.after_chunks
        if cut_at < 0 and not self.reply.chunk_delay_s:
            conn.respond_chunked(200, answer.content_type, [*answer.frames, answer.trailer])
            self.streams.started += 1
            self.streams.finished += 1
            return None
        return self._stream_slowly(conn, answer, fault, cut_at)

    async def _stream_slowly(
        self, conn: Connection, answer: StreamAnswer, fault: Fault | None, cut_at: int
    ) -> None:
        """A stream written chunk by chunk; ``self.streams`` counts how it ended."""
        streams = self.streams
        streams.started += 1
        try:
            await self._write_slowly(conn, answer, fault, cut_at)
        except BaseException:  # cancelled when the connection is lost: the client closed it mid-stream
            streams.cut += 1
            raise
        if conn.open:
            streams.finished += 1
        else:
            streams.cut += 1

    async def _write_slowly(
        self, conn: Connection, answer: StreamAnswer, fault: Fault | None, cut_at: int
    ) -> None:
        conn.start_chunked(200, answer.content_type)
        delay = self.reply.chunk_delay_s
        for index, frame in enumerate(answer.frames):
            if index == cut_at:
                if fault is None or fault.kind is not FaultKind.STALL:
                    break
                await self._stall(conn, fault)
                if not conn.open:
                    return
            if delay and index:
                await asyncio.sleep(delay)
            conn.write_chunk(frame)
        if fault is None or cut_at < 0 or fault.kind is FaultKind.STALL:
            conn.write_chunk(answer.trailer)
        elif fault.kind is FaultKind.CUT_STREAM:
            await _flushed_abort(conn)
            return
        elif fault.kind is FaultKind.MALFORMED:
            conn.write_chunk(self.malformed_frame())
        elif fault.kind is FaultKind.STREAM_ERROR:
            conn.write_chunk(self.error_frame(fault.message))
        elif fault.kind is FaultKind.UNFINISHED:
            conn.write_chunk(answer.trailer)
        conn.end_chunked()

    async def _stall(self, conn: Connection, fault: Fault) -> None:
        """Say nothing, the connection open, until ``fault.delay_s`` passed or its ``gate`` is set (neither
        given: until the client closes the connection or the server stops)."""
        assert self._stopping is not None
        conn.watch()
        loop = asyncio.get_running_loop()
        until = loop.time() + fault.delay_s if fault.delay_s else None
        while conn.open and not self._stopping.is_set():
            if fault.gate is not None and fault.gate.is_set():
                return
            if until is not None and loop.time() >= until:
                return
            await asyncio.sleep(0.01)

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
        if fault.kind is FaultKind.HOLD:
            return ErrorAnswer(400, "bad fault: hold needs a gate (threading.Event): set it in-process")
        self.faults.set(fault, model=model, times=times)
        return JsonAnswer({"ok": True})

    def _control_clear(self, incoming: Incoming) -> Answer:
        body = incoming.body if isinstance(incoming.body, dict) else {}
        self.faults.clear(model=body.get("model"))
        return JsonAnswer({"ok": True})

    def _control_clear_requests(self, incoming: Incoming) -> Answer:
        self.clear_requests()
        return JsonAnswer({"ok": True})

    def _control_streams(self, incoming: Incoming) -> Answer:
        return JsonAnswer(self.streams.as_dict())

    def _control_requests(self, incoming: Incoming) -> Answer:
        return JsonAnswer(
            [
                {"method": r.method, "path": r.path, "headers": r.headers, "body": r.body}
                for r in self._recorded
            ]
        )


def _listening_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def _held_port(host: str, port: int) -> socket.socket | None:
    """The port bound but not listening: connecting is refused (a reset), as with nothing there, and no
    other server of the test run can be given the port meanwhile (a port freed while "dead" was once
    handed to a gateway's ``--port 0``, which then answered as the dead box)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:  # already taken (no worse than before): refusing goes on without the hold
        sock.close()
        return None
    return sock


async def _drained(conn: Connection, limit: int) -> None:
    """Wait (up to ~10 s) until at most ``limit`` bytes are buffered, or the connection is gone."""
    for _ in range(10_000):
        if conn.buffered() <= limit or not conn.open:
            return
        await asyncio.sleep(0.001)


async def _flushed_abort(conn: Connection) -> None:
    """Abort once what was written has left, so the client gets those bytes and then a reset."""
    for _ in range(1000):
        if not conn.buffered():
            break
        await asyncio.sleep(0.001)
    conn.abort()
