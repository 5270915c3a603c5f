"""The transport border: one ``Request`` in, one ``Response`` out (httpx's ``_transports/base.py``).

Above this line the runtime speaks in endpoints, deadlines and wire formats (``upstream/exchange.py``
and the adapters); below it a transport speaks HTTP: it opens, pools, frames and times connections.
The border exists so that neither side knows the other's parts: an adapter never sees a connection, a
pool or a parser (it holds a ``Transport`` and imports nothing of ``http1`` or ``client``), and a
transport never sees an endpoint, a credential table or a chat format. What crosses is plain:

- ``Request``: an ``Origin`` (the provider's base URL, pool, encoded headers and connect deadline,
  fixed with the plan: ``wire.base.Endpoint`` is one), a method and a path, a body, and the exchange's
  deadlines as loop times; eight references, built once per upstream call.
- ``Response``: the status and headers once they have arrived, then the body as it arrives (``read``,
  or ``take`` and ``arrival`` without a task switch, or a ``sink`` fed in the read callback), and
  ``release`` (the connection may be reused) or ``close`` (it may not).
- failures: the one exception tree of ``net/http_errors.py``, whatever library a transport runs on.

Two transports stand behind it, one row each in ``TRANSPORTS``: ``own`` (``net/client.py``: the
project's HTTP/1.1 client on httptools, measured the cheapest, docs/upstream-client.md) and ``httpx``
(``net/httpx_transport.py``: plain httpx, for debugging: is it our client or the upstream?). The
gateway takes the one named by ``INTERLOCK_TRANSPORT`` (default ``own``) when it opens its adapters.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol


class Counter(Protocol):
    """Where a transport counts something per pool (a metrics counter's child)."""

    def inc(self, amount: float = 1.0) -> None: ...


class Origin(Protocol):
    """Where requests go and what each carries, fixed when the plan is built (``wire.base.Endpoint`` is
    one): read by the transport, never built per request."""

    @property
    def url(self) -> str:
        """The provider's base URL (its path a prefix of every request's)."""

    @property
    def label(self) -> str:
        """The pool: one provider's or worker's connections are its own (one credential each)."""

    @property
    def kind(self) -> str:
        """Its provider kind (whether a POST carries an ``Idempotency-Key``)."""

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def lines(self) -> bytes | None:
        """``headers`` encoded once (``Name: value\\r\\n`` each); None: one cannot be sent (refused
        by name)."""

    @property
    def connect_s(self) -> float: ...

    @property
    def patience(self) -> Callable[[float], float | None] | None:
        """Asked when the first-byte deadline passes how much longer to wait (a server that reports its
        progress); None: no longer."""


@dataclass(slots=True)
class Request:
    """One upstream request: ``method`` ``origin.url`` + ``path`` with ``body`` (JSON, or None).

    Deadlines are loop times: connecting ends within ``origin.connect_s`` (and before
    ``first_byte_at``), the answer's head arrives before ``first_byte_at`` (``Response.answered()``
    then moves the exchange on to ``total_at``). ``now``: the loop's time when the caller has just read
    it; ``headers``: this request's own, sent after the origin's (a traced attempt's ``traceparent``).
    What is fixed per provider stays on the ``origin``: a request is eight references, made per call."""

    origin: Origin
    method: str
    path: str
    body: bytes | None
    first_byte_at: float
    total_at: float
    now: float | None = None
    headers: Mapping[str, str] | None = None


class Response(Protocol):
    """One answer, handed over once its status and headers have arrived."""

    status: int
    content_length: int | None
    sink: Callable[[bytes], None] | None
    """Set by a reader that takes the body as it arrives (a stream's relay): each read is handed to it
    in the read callback, nothing buffered; only the end or a failure wakes ``arrival``."""

    @property
    def headers(self) -> dict[str, str]:
        """The headers, names lowercased, repeated ones joined with ``", "``."""

    def answered(self, idle_s: float = 0.0) -> None:
        """The first-byte phase is over: from now on the total deadline counts, and with ``idle_s`` no
        more than that between two reads."""

    async def read(self) -> bytes:
        """The body bytes that arrived since the last read, waiting for some; ``b""`` at its end."""

    async def read_all(self, cap: int) -> bytes:
        """The whole body; past ``cap`` bytes a ``BodyTooLarge``."""

    def take(self) -> bytes | None:
        """``read`` without the wait: None when nothing has arrived yet (then await ``arrival()``)."""

    def arrival(self) -> Awaitable[None]:
        """Done when something arrived (bytes, the end, a failure)."""

    def wake(self) -> None:
        """Wake the reader waiting on ``arrival`` (a sink that wants its task back)."""

    def pause(self) -> None:
        """Stop reading from the upstream (the reader's own consumer is full)."""

    def resume(self) -> None: ...

    def release(self) -> None:
        """Done with this answer: its connection may be reused once the body is over."""

    def close(self) -> None:
        """Drop the connection; idempotent."""


class Transport(Protocol):
    """What the adapters hold: one ``send`` and the loop's clock the deadlines are counted in."""

    def time(self) -> float:
        """The loop's time (deadlines are loop times)."""

    async def send(self, request: Request) -> Response:
        """Send ``request``; return once the answer's status and headers have arrived. Raises the
        ``net/http_errors.py`` tree only."""

    async def aclose(self) -> None:
        """Close every connection; a request sent after raises ``ClientClosed``."""


class Opener(Protocol):
    """A transport's constructor as the gateway calls it, at startup on the running loop."""

    def __call__(
        self,
        *,
        resends: Callable[[str], Counter] | None = None,
        on_stray: Callable[[str, float], None] | None = None,
    ) -> Transport: ...


TRANSPORTS: Mapping[str, str] = {
    "own": "interlock.runtime.net.client:UpstreamClient.create",
    "httpx": "interlock.runtime.net.httpx_transport:HttpxTransport.create",
}
"""The transports by name (``INTERLOCK_TRANSPORT``), each an import path: only the one in use loads."""


def opener(name: str) -> Opener:
    """The constructor of the transport ``name`` (a row of ``TRANSPORTS``); ValueError for any other."""
    path = TRANSPORTS.get(name)
    if path is None:
        raise ValueError(f"unknown transport {name!r}; expected one of {', '.join(TRANSPORTS)}")
    module, _, attribute = path.partition(":")
    found: object = importlib.import_module(module)
    for part in attribute.split("."):
        found = getattr(found, part)
    return found  # type: ignore[return-value]
