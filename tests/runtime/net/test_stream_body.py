"""``StreamBody``: a chunked answer's body written straight to the transport, under the connection's flow
control, behind the real guarded protocol on a loopback socket (an in-process uvicorn, a real client)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from interlock.runtime.base.asgi import STREAM_BODY, StreamBody
from interlock.runtime.loaded.plan import RuntimePlan
from tests.runtime.net.inproc import App, gateway_protocol, served

PIECE = b"x" * 65536
MOST = 1024  # pieces (64 MiB): the transport's buffer is over its high-water mark long before


async def serving(plan: RuntimePlan, app: App, client: Callable[[str], Awaitable[None]]) -> None:
    """Serve ``app`` with the gateway's protocol on a loopback port while ``client(url)`` runs."""
    async with served(app, gateway_protocol(plan)) as port:
        await client(f"http://127.0.0.1:{port}")


def test_a_client_that_does_not_read_pauses_the_writer_until_it_reads(basic_plan: RuntimePlan) -> None:
    paused = asyncio.Event()
    written: list[int] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body: StreamBody = scope["extensions"][STREAM_BODY]
        assert not body.ready()  # not started yet
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"x/y")]})
        assert body.ready()
        for index in range(MOST):
            written.append(index)
            if body.write(PIECE):  # over the high-water mark: the writer must wait
                paused.set()
                await body.drain()  # returns once the client has read enough
                break
        await send({"type": "http.response.body", "body": b"end"})

    async def client(url: str) -> None:
        async with httpx.AsyncClient() as http, http.stream("GET", url) as response:
            await asyncio.wait_for(paused.wait(), 30)  # nothing read yet: the buffer filled up
            body = await response.aread()
        assert len(written) < MOST
        assert body == PIECE * len(written) + b"end"  # framed as HTTP/1.1 chunks, every piece once

    asyncio.run(serving(basic_plan, app, client))


@pytest.mark.parametrize(
    ("method", "headers"),
    [("GET", [(b"content-length", b"3")]), ("HEAD", [])],
    ids=["content-length", "head"],
)
def test_an_answer_that_is_not_a_chunked_body_is_left_to_send(
    basic_plan: RuntimePlan, method: str, headers: list[tuple[bytes, bytes]]
) -> None:
    ready: list[bool] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        ready.append(scope["extensions"][STREAM_BODY].ready())
        await send({"type": "http.response.body", "body": b"abc" if method == "GET" else b""})

    async def client(url: str) -> None:
        async with httpx.AsyncClient() as http:
            response = await http.request(method, url)
        assert response.status_code == 200

    asyncio.run(serving(basic_plan, app, client))
    assert ready == [False]


def test_pieces_for_a_client_that_left_are_dropped(basic_plan: RuntimePlan) -> None:
    started, gone, after = asyncio.Event(), asyncio.Event(), []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body: StreamBody = scope["extensions"][STREAM_BODY]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        body.write(b"first")
        started.set()
        while (await receive())["type"] != "http.disconnect":
            pass
        after.append(body.write(b"into the void"))  # no error, no pause: dropped
        gone.set()

    async def client(url: str) -> None:
        _, writer = await asyncio.open_connection(*url.removeprefix("http://").split(":"))
        writer.write(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        await started.wait()
        writer.close()
        await asyncio.wait_for(gone.wait(), 30)

    asyncio.run(serving(basic_plan, app, client))
    assert after == [False]
