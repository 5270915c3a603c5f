"""A keep-alive HTTP/1.1 client on a raw socket, for measuring the gateway from inside its own process.

It allocates no reference cycles and runs no event loop, so what the collector or the loop sees while it
runs (in a thread beside the gateway) is the gateway's alone: ``bench/gc_pauses.py`` and
``tests/runtime/serving/test_no_cycles.py``. It reads answers whole by ``Content-Length`` or chunked
framing and nothing else: enough for the gateway's own answers, not a general client.
"""

from __future__ import annotations

import socket


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
