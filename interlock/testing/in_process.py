"""The gateway served in this process, and a keep-alive HTTP/1.1 client on a raw socket, for measuring it
from inside its own process.

It allocates no reference cycles and runs no event loop, so what the collector or the loop sees while it
runs (in a thread beside the gateway) is the gateway's alone: ``bench/gc_pauses.py`` and
``tests/runtime/net/test_no_cycles.py``. It reads answers whole by ``Content-Length`` or chunked
framing and nothing else: enough for the gateway's own answers, not a general client.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from interlock.runtime.app.gateway import Gateway


@asynccontextmanager
async def serving(gateway: Gateway) -> AsyncIterator[int]:
    """``gateway`` served in this process as ``interlock serve`` serves it (uvicorn, the guarded protocol,
    its lifespan) on a loopback port, which is yielded; stopped on leaving."""
    import uvicorn

    from interlock.runtime.net.connections import ConnectionBook, guarded_protocol

    book = ConnectionBook(lambda: gateway.plan.server, gateway.metrics)
    config = uvicorn.Config(
        gateway, loop="uvloop", http=guarded_protocol(book), ws="none", lifespan="on", log_config=None
    )
    server = uvicorn.Server(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:  # noqa: ASYNC110 - uvicorn offers no event for it
            await asyncio.sleep(0.01)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await task


def chat_request(body: bytes, path: bytes = b"/v1/chat/completions") -> bytes:
    """A whole POST of ``body`` (JSON) to ``path``, ready to send again and again."""
    return (
        b"POST %b HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%b"
        % (path, len(body), body)
    )


def read_answer(sock: socket.socket, buffer: bytes) -> tuple[bytes, bytes]:
    """Read one whole answer from ``sock`` (``buffer``: what was read past the previous one); its status
    line, and what was read past it. ``ConnectionError`` when the gateway closes the connection first."""
    while True:
        head, found, rest = buffer.partition(b"\r\n\r\n")
        if found:
            status = head.split(b"\r\n", 1)[0]
            if b"transfer-encoding: chunked" in head.lower():
                end = rest.find(b"0\r\n\r\n")
                if end >= 0:
                    return status, rest[end + 5 :]
            else:
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                if len(rest) >= length:
                    return status, rest[length:]
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("the gateway closed the connection")
        buffer += data
