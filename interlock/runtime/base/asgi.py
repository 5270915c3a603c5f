"""ASGI at the edge: the message types, reading a request body, answering JSON, watching for a disconnect."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from types import UnionType
from typing import Any, Protocol

import orjson

from interlock.runtime.base.errors import BodyTooLarge, InvalidRequest

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Header = tuple[bytes, bytes]

JSON_TYPE: Header = (b"content-type", b"application/json")


class ClientGone(Exception):
    """The client disconnected before the request body was read."""


async def read_object(scope: Scope, receive: Receive, limit: int) -> dict[str, Any]:
    """The request body as the JSON object it must be (``json_object``), refusing more than ``limit``
    bytes (by Content-Length, else while reading)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                raise InvalidRequest("the Content-Length header is not a number") from None
            if declared > limit:
                raise BodyTooLarge(
                    f"the request body is {declared} bytes; this gateway accepts at most {limit}"
                )
            break
    message = await receive()
    if message["type"] != "http.request":
        raise ClientGone
    body: bytes = message.get("body", b"")
    if message.get("more_body", False):
        parts = [body]
        size = len(body)
        while message.get("more_body", False):
            message = await receive()
            if message["type"] != "http.request":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(f"the request body is over {limit} bytes, the most this gateway accepts")
            parts.append(chunk)
        body = b"".join(parts)
    elif len(body) > limit:
        raise BodyTooLarge(f"the request body is over {limit} bytes, the most this gateway accepts")
    return json_object(body, InvalidRequest, "the request body")


def json_object(raw: bytes | str, refuse: Callable[[str], Exception], what: str) -> dict[str, Any]:
    """``raw`` as the JSON object it must be, at each border that reads one (a request body, an upstream's
    stream event or line, the plan file); else ``refuse`` of the one wording: "<what> is not valid JSON
    (<the parser's complaint>)" or "<what> must be a JSON object, not <its kind>". The parser's error is
    not chained: its message is said, and it holds the whole document, which a kept error would keep."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise refuse(f"{what} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise refuse(f"{what} must be a JSON object, not {json_type(value)}")
    return value


JSON_TYPES: tuple[tuple[type | UnionType, str], ...] = (
    (type(None), "null"),
    (bool, "a boolean"),  # before the numbers: a bool is an int
    (int | float, "a number"),
    (str, "a string"),
    (list, "an array"),
)


def json_type(value: object) -> str:
    """What kind of JSON value ``value`` is, as a message names it."""
    return next((name for kind, name in JSON_TYPES if isinstance(value, kind)), "an object")


async def send_json(send: Send, status: int, payload: bytes, headers: list[Header]) -> None:
    headers.append(JSON_TYPE)
    headers.append((b"content-length", b"%d" % len(payload)))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


STREAM_BODY = "interlock.stream_body"  # the ASGI scope extension that holds a request's StreamBody
DISCONNECT = "interlock.disconnect"  # the ASGI scope extension that holds a request's Disconnect
"""The server's extensions the app reads (``net/connections.py`` offers both on every request it parses;
under another server, plain uvicorn, neither is there and the app falls back to ASGI ``send``)."""


class StreamBody(Protocol):
    """The body of one request's chunked answer, written straight to its connection's transport
    (offered as the scope extension ``STREAM_BODY``; the request's ``Request`` is one).

    What ``send`` does for each ``http.response.body`` message of a chunked answer, less what only the
    first message needs: one framed write per piece. The ASGI ``send`` still starts the answer (its
    headers, CORS's among them) and ends it (the last piece, the terminating chunk and the keep-alive
    bookkeeping); only the pieces between go this way, and only once ``ready`` says the answer is
    started and chunked. ``write`` returns True when the transport's buffer is over its high-water
    mark: the caller awaits ``drain`` (resumed when the buffer drains or the client goes). A gone
    client's pieces are dropped, as ``send`` drops them.
    """

    def ready(self) -> bool: ...

    def write(self, data: bytes) -> bool: ...

    async def drain(self) -> None: ...


class Disconnect:
    """Says that a request's client went away, to whoever watches the request (``callback``, set and
    cleared by ``asgi.DisconnectWatch``): the protocol fires it when the connection is lost or closed
    with the answer unfinished. One per request, offered as the scope extension
    ``DISCONNECT``. ``loop``: the request's event loop, when the server knows it (the
    watch then finds its task without ``asyncio.get_running_loop``, a ``getpid`` system call on 3.11)."""

    __slots__ = ("callback", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.callback: Callable[[], None] | None = None
        self.loop = loop

    def fire(self) -> None:
        callback = self.callback
        if callback is not None:
            self.callback = None
            callback()


class DisconnectWatch:
    """Cancels the handling task when the client goes away; ``stop`` before the last byte is sent.

    Under ``interlock serve`` the server says when a client goes (``hook``: the request's
    ``Disconnect``, a scope extension), so watching costs a callback and no task.
    Under another ASGI server (or a test's transport) a task waits on ``receive`` for
    ``http.disconnect`` and is cancelled by ``stop``: a cancelled task leaves a reference cycle (its
    ``CancelledError``, traceback and frames) that only the cyclic collector frees, about 30 objects a
    request, hence the hook.
    """

    __slots__ = ("_hook", "_watcher", "done", "fired", "task")

    def __init__(self, receive: Receive, hook: Disconnect | None = None) -> None:
        task = asyncio.current_task(hook.loop if hook is not None else None)
        assert task is not None
        self.task = task
        self.done = False
        self.fired = False
        self._hook = hook
        if hook is not None:
            hook.callback = self._gone
            self._watcher: asyncio.Task[None] | None = None
        else:
            self._watcher = asyncio.get_running_loop().create_task(self._watch(receive))

    def _gone(self) -> None:
        if not self.done:
            self.fired = True
            self.task.cancel()

    async def _watch(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self._gone()
                return

    def stop(self) -> None:
        self.done = True
        hook = self._hook
        if hook is not None:
            hook.callback = None  # the hook held this watch (a bound method): no cycle is left behind
            self._hook = None
        elif self._watcher is not None:
            self._watcher.cancel()

    def swallow(self) -> bool:
        """After a CancelledError: True when it was this watch's doing (then it is undone)."""
        if self.fired:
            self.task.uncancel()
            return True
        return False


def closing(send: Send) -> Send:
    """``send`` adding ``Connection: close``: for an answer given without reading the request's body
    (admin routes take none; a 405), so the server closes the connection instead of reading (and
    discarding) the rest of it."""

    async def send_closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), (b"connection", b"close")]
        await send(message)

    return send_closing


def has_body(scope: Scope) -> bool:
    """The request announces a body (a non-zero Content-Length, or chunked)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value.strip() not in (b"0", b"")
        if name == b"transfer-encoding":
            return True
    return False
