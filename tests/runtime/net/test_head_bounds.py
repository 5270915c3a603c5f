"""A request's head is bounded (issue 39, items 3 and 15): past 32 KiB of request line and header fields,
or past 100 fields, the gateway answers 431 and closes, whether the head comes in one read or trickles
in small pieces (one endless header line included), and never calls the app; a request target that
arrives in many pieces is joined once. An HTTP/1.1 request without a ``Host`` field, or any request with
two, is answered 400. Before: every one of these was answered 200, after holding whatever was sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics, StateView
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.net.connections import ConnectionBook, guarded_protocol
from interlock.runtime.net.head import MAX_HEAD_BYTES, MAX_HEADER_FIELDS
from interlock.runtime.state.memory import MemorySlots
from tests.runtime.net.inproc import served


class Seen:
    """An app that answers 200 with the path it saw, and remembers each call."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.paths.append(scope["path"])
        body = scope["path"].encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", b"%d" % len(body))],
            }
        )
        await send({"type": "http.response.body", "body": body})


async def talk(port: int, pieces: list[bytes]) -> bytes:
    """Write ``pieces`` one by one (stopping when the server has closed), then read until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for piece in pieces:
            if reader.at_eof() or writer.is_closing():
                break
            writer.write(piece)
            try:
                await writer.drain()
            except ConnectionError:
                break
            await asyncio.sleep(0)
        return await reader.read()
    except ConnectionError:
        return b""
    finally:
        writer.close()


def run(plan: RuntimePlan, pieces: list[bytes]) -> tuple[bytes, Seen, Metrics]:
    app = Seen()
    metrics = Metrics(StateView(lambda: plan, HealthBook(plan.health), MemorySlots()))
    protocol = guarded_protocol(ConnectionBook(lambda: plan.server, metrics))

    async def scenario() -> bytes:
        async with served(app, protocol) as port:
            return await talk(port, pieces)

    return asyncio.run(scenario()), app, metrics


def closed(metrics: Metrics, reason: str) -> float:
    return metrics.connections_closed.labels(reason).value


HEAD = b"GET /ok HTTP/1.1\r\nHost: t\r\n"
END = b"Connection: close\r\n\r\n"


def test_a_head_just_inside_the_bound_is_served(basic_plan: RuntimePlan) -> None:
    fields = b"".join(b"x-f%d: %s\r\n" % (n, b"v" * 100) for n in range(MAX_HEADER_FIELDS - 3))
    assert len(HEAD + fields + END) < MAX_HEAD_BYTES
    answer, app, _ = run(basic_plan, [HEAD + fields + END])
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert app.paths == ["/ok"]


@pytest.mark.parametrize(
    "pieces",
    [
        [HEAD + b"x-big: " + b"a" * MAX_HEAD_BYTES + b"\r\n" + END],  # one read
        [HEAD + b"x-big: "] + [b"a" * 1024] * 200,  # one header line that never ends, trickled
        [HEAD] + [b"x-n%d: %s\r\n" % (n, b"b" * 1000) for n in range(40)] + [END],  # many lines
        [b"GET /" + b"u" * 1024] + [b"u" * 1024] * 40 + [b" HTTP/1.1\r\n", END],  # a long target
    ],
    ids=["one-read", "endless-line", "many-lines", "long-target"],
)
def test_a_head_past_32_kib_is_answered_431_and_never_reaches_the_app(
    basic_plan: RuntimePlan, pieces: list[bytes]
) -> None:
    answer, app, metrics = run(basic_plan, pieces)
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert b'"code":"request_header_fields_too_large"' in answer
    assert app.paths == []
    assert closed(metrics, "headers_too_large") == 1


def test_more_than_100_fields_are_answered_431(basic_plan: RuntimePlan) -> None:
    fields = b"".join(b"x-f%d: 1\r\n" % n for n in range(MAX_HEADER_FIELDS))
    answer, app, metrics = run(basic_plan, [HEAD + fields + END])
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert app.paths == []
    assert closed(metrics, "headers_too_large") == 1


def test_a_target_in_many_pieces_is_joined_whole(basic_plan: RuntimePlan) -> None:
    target = b"/" + b"p" * 3000
    pieces = (
        [b"GET "] + [target[n : n + 7] for n in range(0, len(target), 7)] + [b" HTTP/1.1\r\nHost: t\r\n", END]
    )
    answer, app, _ = run(basic_plan, pieces)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert app.paths == [target.decode()]


def test_a_pipelined_request_after_a_large_body_is_not_counted_as_head(basic_plan: RuntimePlan) -> None:
    body = b"z" * (MAX_HEAD_BYTES * 3)
    first = b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    second = b"GET /b HTTP/1.1\r\nHost: t\r\n" + END
    answer, app, _ = run(basic_plan, [first + second])
    assert answer.count(b"HTTP/1.1 200 OK\r\n") == 2
    assert app.paths == ["/a", "/b"]


@pytest.mark.parametrize(
    ("head", "served_ok"),
    [
        (b"GET /h HTTP/1.1\r\n", False),  # no Host
        (b"GET /h HTTP/1.1\r\nHost: a\r\nHost: b\r\n", False),  # two
        (b"GET /h HTTP/1.0\r\nHost: a\r\nhost: b\r\n", False),  # two, even in HTTP/1.0
        (b"GET /h HTTP/1.0\r\n", True),  # HTTP/1.0 needs none
        (b"GET /h HTTP/1.1\r\nHost: a\r\n", True),
    ],
)
def test_a_request_needs_exactly_one_host(basic_plan: RuntimePlan, head: bytes, served_ok: bool) -> None:
    answer, app, metrics = run(basic_plan, [head + END])
    if served_ok:
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
        assert app.paths == ["/h"]
    else:
        assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
        assert b'"code":"invalid_host"' in answer
        assert app.paths == []
        assert closed(metrics, "invalid_host") == 1


def test_a_head_too_large_behind_a_request_being_answered_closes_the_connection(
    basic_plan: RuntimePlan,
) -> None:
    """Pipelined: the first request is answered, the second's head is too large: 431, connection closed
    (never read again as if it were waiting for a new request)."""
    second = b"GET /two HTTP/1.1\r\nHost: t\r\nx-big: " + b"a" * (MAX_HEAD_BYTES + 10) + b"\r\n" + END
    answer, app, metrics = run(
        basic_plan, [HEAD + b"\r\n" + second, b"GET /three HTTP/1.1\r\nHost: t\r\n" + END]
    )
    assert b"HTTP/1.1 431 " in answer
    assert "/two" not in app.paths
    assert "/three" not in app.paths
    assert closed(metrics, "headers_too_large") == 1
