"""The client transport with its writes corked for one event-loop step: what a step writes, one send().

uvicorn writes a response's status line and headers with one ``transport.write`` and its body with
another, and uvloop sends each at once: two system calls for every small answer, two segments on
the wire, two wake-ups of the client. Held until the end of the loop step instead (``call_soon``), a
non-streaming answer (head and body are written in the same step) leaves in one ``send()``.

Nothing waits longer than the step that wrote it: a stream's chunk is flushed at the end of the step
that wrote it, as are a ``100 Continue`` and a canned error before a close. ``close()`` flushes
first; ``abort()`` drops what is held, as it drops what the socket had not sent.
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
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        held = self._held
        if not held:
            self._loop.call_soon(self.flush)
        held.append(bytes(data))

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Send what this step wrote, as one write (scheduled by the step's first write)."""
        held = self._held
        if held:
            data = held[0] if len(held) == 1 else b"".join(held)
            held.clear()
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held.clear()
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
        return self._transport.get_write_buffer_size() + sum(len(data) for data in self._held)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()
