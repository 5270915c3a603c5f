"""The gateway's HTTP/1.1 protocol (``net.connections``) against uvicorn's own httptools protocol: the
same app, the same raw requests on a loopback socket, the same bytes back (keep-alive, pipelining,
chunked request bodies, ``100 Continue``, HEAD, 204, HTTP/1.0, a parse error, an app that fails), and
what the app saw of each request (its scope and body) the same."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import orjson
import pytest
import uvicorn

from interlock.runtime.loaded.plan import RuntimePlan
from tests.runtime.net.inproc import SERVE, gateway_protocol, served
from tests.waiting import until

SEEN = (
    "type",
    "http_version",
    "method",
    "scheme",
    "path",
    "raw_path",
    "query_string",
    "root_path",
    "headers",
)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Echoes what it saw; a few paths answer otherwise (a stream, no content, a failure)."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path = scope["path"]
    if path == "/fail":
        raise RuntimeError("a failing app")
    if path == "/silent":
        return
    if path.startswith("/bad-"):  # a header uvicorn refuses: the app fails after starting its answer
        bad = (b"x bad", b"1") if path == "/bad-name" else (b"x-bad", b"a\r\nset-cookie: b=1")
        await send({"type": "http.response.start", "status": 200, "headers": [bad]})
        return
    if path == "/empty":
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/stream":
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"Content-Type", b"text/plain")]}
        )
        for piece in (b"one", b"", b"two"):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"end"})
        return
    seen = {key: scope[key] for key in SEEN} | {"body": body}
    payload = orjson.dumps(
        seen, default=lambda value: value.decode("latin-1") if isinstance(value, bytes) else list(value)
    )
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    if path == "/bye":
        headers.append((b"Connection", b"close"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def request(method: str, target: str, body: bytes = b"", *headers: str, version: str = "1.1") -> bytes:
    lines = [f"{method} {target} HTTP/{version}", "Host: t", *headers]
    if body and not any(h.lower().startswith("transfer-encoding") for h in headers):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


CLOSE = request("GET", "/last", b"", "Connection: close")
CASES = {
    "pipelined": request("GET", "/a?x=1&y=%20") + request("POST", "/b", b'{"k": 1}') + CLOSE,
    "chunked body": request("POST", "/c", b"4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n", "Transfer-Encoding: chunked")
    + CLOSE,
    "head": request("HEAD", "/h") + CLOSE,
    "no content": request("GET", "/empty") + CLOSE,
    "stream": request("GET", "/stream") + CLOSE,
    "http/1.0": request("GET", "/ten", version="1.0"),
    "connection close from the app": request("GET", "/bye") + request("GET", "/never"),
    "quoted path": request("GET", "/caf%C3%A9/x%2Fy?q=%41") + CLOSE,
    "absolute form": request("GET", "http://t/abs?z=1") + CLOSE,
    "app fails": request("GET", "/fail") + CLOSE,
    "app does not answer": request("GET", "/silent") + CLOSE,
    "unparsable": b"GET / HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n",
}


async def exchange(port: int, data: bytes, *, then: bytes = b"") -> bytes:
    """Write ``data`` (then, once a ``100 Continue`` is read, ``then``); everything read until the server
    closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    got = b""
    if then:
        got = await reader.readuntil(b"100 Continue\r\n\r\n")
        writer.write(then)
    got += await reader.read()
    writer.close()
    return got


async def both(basic_plan: RuntimePlan, data: bytes, *, then: bytes = b"") -> tuple[bytes, bytes]:
    async with served(app, "httptools") as theirs, served(app, gateway_protocol(basic_plan)) as ours:
        return await exchange(theirs, data, then=then), await exchange(ours, data, then=then)


@pytest.mark.parametrize("case", list(CASES))
def test_the_answers_are_uvicorns_byte_for_byte(basic_plan: RuntimePlan, case: str) -> None:
    theirs, ours = asyncio.run(both(basic_plan, CASES[case]))
    assert theirs  # (something was answered at all)
    assert ours == theirs


@pytest.mark.parametrize("path", ["/bad-name", "/bad-value"])
def test_a_header_with_a_forbidden_byte_is_refused_as_uvicorn_refuses_it(
    basic_plan: RuntimePlan, path: str
) -> None:
    """A name with a space, a value with a line break (a header injected): nothing of the answer is
    written, the connection is closed, as uvicorn does."""
    theirs, ours = asyncio.run(both(basic_plan, request("GET", path)))
    assert ours == theirs == b""


def test_100_continue_is_sent_before_the_body_is(basic_plan: RuntimePlan) -> None:
    head = request("POST", "/up", b"", "Expect: 100-continue", "Content-Length: 5", "Connection: close")
    theirs, ours = asyncio.run(both(basic_plan, head, then=b"hello"))
    assert ours.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert b'"body":"hello"' in ours
    assert ours == theirs


def test_an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout(
    basic_plan: RuntimePlan,
) -> None:
    async def main() -> None:
        async with served(app, gateway_protocol(basic_plan), timeout_keep_alive=0.05) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request("GET", "/one"))
            answer = await reader.read()  # until the server closes: nothing more was asked
            assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
            assert answer.count(b"HTTP/1.1") == 1
            writer.close()

    asyncio.run(main())


def test_a_large_body_pauses_reading_until_the_app_reads(basic_plan: RuntimePlan) -> None:
    """A body far over the buffer limit arrives whole, in order, while the app reads it in pieces."""
    body = bytes(range(256)) * 4096  # 1 MiB

    async def main() -> None:
        async with served(app, gateway_protocol(basic_plan)) as port:
            got = await exchange(port, request("POST", "/big", body, "Connection: close"))
        assert orjson.loads(got.partition(b"\r\n\r\n")[2])["body"] == body.decode("latin-1")

    asyncio.run(main())


def test_a_stopping_server_lets_the_answer_in_progress_finish(basic_plan: RuntimePlan) -> None:
    """Graceful shutdown: the connection busy with a request is closed after its answer, not before."""
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        entered.set()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]})
        await send({"type": "http.response.body", "body": b"done"})

    async def main() -> bytes:
        server = uvicorn.Server(
            uvicorn.Config(slow, http=gateway_protocol(basic_plan), lifespan="off", **SERVE)
        )
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        task = asyncio.create_task(server.serve(sockets=[sock]))
        await until(lambda: server.started, "uvicorn to start")
        reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        writer.write(request("GET", "/slow"))
        await entered.wait()
        server.should_exit = True  # as SIGTERM does
        connections: set[Any] = server.server_state.connections
        await until(lambda: all(not c.answering.keep_alive for c in connections), "the drain to begin")
        release.set()
        answer = await reader.read()
        await task
        return answer

    answer = asyncio.run(main())
    assert answer.endswith(b"\r\n\r\ndone")
    assert b"connection: close\r\n" in answer


def test_the_access_log_line_is_uvicorns(basic_plan: RuntimePlan, caplog: pytest.LogCaptureFixture) -> None:
    """``--access-log text``: one ``uvicorn.access`` line per request, as uvicorn wrote it."""
    asked = (
        request("GET", "/a%20b?x=1") + request("POST", "/b", b"{}") + request("GET", "/ten", version="1.0")
    )

    def lines(http: type[asyncio.Protocol] | str) -> list[str]:
        caplog.clear()

        async def main() -> None:
            async with served(app, http, access_log=True) as port:
                await exchange(port, asked)

        with caplog.at_level(logging.INFO, logger="uvicorn.access"):
            asyncio.run(main())
        return [r.getMessage().split(" - ", 1)[1] for r in caplog.records if r.name == "uvicorn.access"]

    theirs = lines("httptools")
    assert theirs == ['"GET /a%20b?x=1 HTTP/1.1" 200', '"POST /b HTTP/1.1" 200', '"GET /ten HTTP/1.0" 200']
    assert lines(gateway_protocol(basic_plan)) == theirs
