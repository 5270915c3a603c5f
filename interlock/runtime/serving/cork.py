"""The client transport with one write held back until the next write or the end of the loop step.

uvicorn writes a response's status line and headers with one ``transport.write`` and its body with
another, and uvloop sends each at once: two system calls for every small answer, two segments on
the wire, two wake-ups of the client. Here a write is held, and the next write of the same step goes
out joined to it, at once: a non-streaming answer (head and body written in the same step) leaves in
one ``send()``.

At most one write is held, and never past the end of the step that wrote it (``call_soon``): a lone
stream chunk, a ``100 Continue`` or a canned error goes out then. Holding only one keeps flow control
working: everything but that one write reaches the real transport at once, so its buffer fills and
pauses the writer as before. ``close()`` sends what is held first; ``abort()`` drops it, as it drops
what the socket had not sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


class CorkedTransport(asyncio.Transport):
    """Wraps the connection's transport; every method but the writes is the wrapped one's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        held = self._held
        if held is None:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
        else:
            self._held = None
            self._transport.write(held + data)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Send the held write, if any (scheduled by the write that was held)."""
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()
