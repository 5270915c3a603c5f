"""Interim answers (1xx) before an upstream's real one are bounded (issue 39, item 4): at most
``MAX_INTERIM`` of them, and their bytes count in ``MAX_HEAD_BYTES`` with the real head's. A flood of
``102 Processing`` is a ``BadResponse`` read at the first few, never parsed to its end (before: every
interim answer copied the rest of the buffer, and the limit started again at each one: a flood stalled
the event loop for seconds, then was answered 200). A head that trickles in, interim answers and all,
is read whole and as it came."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from interlock.runtime.net import http1, http_errors
from interlock.runtime.net.client import UpstreamClient
from interlock.runtime.net.transport import Request
from tests.runtime.net.origins import origin

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
PROCESSING = b"HTTP/1.1 102 Processing\r\n\r\n"


@asynccontextmanager
async def upstream(pieces: list[bytes]) -> AsyncIterator[int]:
    """A server on 127.0.0.1 that reads one request head, then writes ``pieces`` one write each."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            for piece in pieces:
                writer.write(piece)
                await writer.drain()
            await reader.read()  # until the client closes
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def get(pieces: list[bytes]) -> tuple[int, bytes, Any]:
    async with upstream(pieces) as port, UpstreamClient.create() as client:
        at = asyncio.get_running_loop().time() + 30
        response = await client.send(
            Request(origin(f"http://127.0.0.1:{port}", {}, connect_s=5), "GET", "/x", None, at, at)
        )
        response.answered()
        body = await response.read_all(100)
        response.release()
        return response.status, body, response.raw_headers


def test_a_flood_of_102_processing_is_refused_at_the_bound() -> None:
    with pytest.raises(http_errors.BadResponse) as caught:
        asyncio.run(get([PROCESSING * 20_000 + OK]))
    assert str(caught.value) == "too many interim responses"


def test_as_many_interim_answers_as_the_bound_are_read_past() -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + PROCESSING * (http1.MAX_INTERIM - 2)
    interim += b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
    assert asyncio.run(get([interim + OK])) == (
        200,
        b"{}",
        [(b"Content-Type", b"application/json"), (b"Content-Length", b"2")],
    )
    with pytest.raises(http_errors.BadResponse):
        asyncio.run(get([interim + PROCESSING + OK]))


def test_interim_answers_count_in_the_head_bound() -> None:
    big = b"HTTP/1.1 103 Early Hints\r\nLink: <" + b"a" * 30_000 + b">; rel=preload\r\n\r\n"
    assert len(big) < http1.MAX_HEAD_BYTES  # each alone fits; three do not
    with pytest.raises(http_errors.HeadTooLarge):
        asyncio.run(get([big, big, big + OK]))


def test_a_head_that_trickles_in_after_interim_answers_is_read_as_it_came() -> None:
    whole = b"HTTP/1.1 100 Continue\r\n\r\n" + PROCESSING + OK
    pieces = [whole[n : n + 3] for n in range(0, len(whole), 3)]
    status, body, raw = asyncio.run(get(pieces))
    assert (status, body) == (200, b"{}")
    assert raw == [(b"Content-Type", b"application/json"), (b"Content-Length", b"2")]
