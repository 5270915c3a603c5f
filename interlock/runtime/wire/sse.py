"""Server-sent-event framing, both ways: the reader the upstream decoders of SSE formats share (OpenAI's,
Anthropic's, Responses'), and the headers and event frame the renderers of those formats write.

Only ``data:`` fields matter; comments and other fields pass. The data of one event is bounded like one
line (``endpoint.max_line_bytes``): an upstream that sends endless short ``data:`` lines and never the
blank line that ends the event is a ProtocolFailure, not a growing buffer.
"""

from __future__ import annotations

from collections import deque
from typing import Any, NoReturn

from interlock.runtime.base.asgi import Header
from interlock.runtime.base.errors import ProtocolFailure
from interlock.runtime.wire.base import Endpoint
from interlock.runtime.wire.error_bodies import credentials, error_for_object

SSE_HEADERS: tuple[Header, ...] = (
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)


def frame(name: str, data: bytes) -> bytes:
    """One named event (Anthropic's and Responses' streams name theirs) holding ``data`` (JSON)."""
    return b"event: %b\ndata: %b\n\n" % (name.encode(), data)


class SSEEvents:
    """Gathers an event's ``data:`` lines; a subclass turns each finished event into chunks."""

    __slots__ = ("_data", "_endpoint", "_size")

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._data: list[bytes] = []
        self._size = 0  # bytes of data in the event being read

    def feed(self, line: bytes, out: deque[dict[str, Any]]) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            if self._data:
                self._dispatch(self._take(), out)
            return
        if line.startswith(b"data:"):
            value = line[6:] if line[5:6] == b" " else line[5:]  # one copy, not two
            self._size += len(line) - 5  # the space counts: endless empty `data: ` lines still add up
            if self._size > self._endpoint.max_line_bytes:  # many data: lines and never a blank one
                raise ProtocolFailure(f"stream event is over the {self._endpoint.max_line_bytes}-byte limit")
            self._data.append(value)

    def whole(self, data: bytes, out: deque[dict[str, Any]]) -> bool:
        """A read that is one whole event (one ``data:`` line, an ``event:`` line before it or not, and
        the blank line), nothing of an earlier event pending: dispatched at once, as ``feed`` line by
        line would; False for any other read (nothing done: a comment, ``\\r\\n``, more lines, part
        of an event)."""
        if self._data:
            return False
        line, _, rest = data.partition(b"\n")
        if line[:6] == b"event:":  # Anthropic's and Responses' events name themselves first
            line, _, rest = rest.partition(b"\n")
        if rest != b"\n" or line[:5] != b"data:" or line[-1] == 13:  # 13: a line that ends "\r\n"
            return False
        self._dispatch(line[6:] if line[5:6] == b" " else line[5:], out)
        return True

    def flush(self, out: deque[dict[str, Any]]) -> None:
        """The body ended: an event still being read counts as finished."""
        if self._data:
            self._dispatch(self._take(), out)

    def _take(self) -> bytes:
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        self._data = []
        self._size = 0
        return data

    def _dispatch(self, data: bytes, out: deque[dict[str, Any]]) -> None:
        """One finished event's data: append its chunks to ``out``; raise UpstreamError."""
        raise NotImplementedError

    def _refused(self, error: Any) -> NoReturn:
        """Raise the UpstreamError an error object in the stream stands for (credentials masked)."""
        raise error_for_object(error, credentials(self._endpoint.headers))
