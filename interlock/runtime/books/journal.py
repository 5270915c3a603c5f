"""What a finished request leaves behind: its id, an access-log line, a row in the recent-events ring.

The request path fills one small ``RequestRecord`` (attribute stores only) and hands it to
``Journal.finish`` once, at the end. ``finish`` costs nothing more unless the request fell back or
failed (one bounded ring append) or the JSON access log is on (one line). Everything kept or written is
metadata: labels, statuses, error classes, durations, token counts. Never a prompt, an answer, a header
value or a credential; a caller's ``X-Request-Id`` is kept only when it is short and plain.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from interlock.runtime.base.clock import MillisClock
from interlock.runtime.books.record import RequestRecord, error_class, label

log = logging.getLogger("interlock.access")

REQUEST_ID_HEADER = b"x-request-id"
MAX_REQUEST_ID = 128
_PLAIN_ID = re.compile(rb"[A-Za-z0-9._:/+=@-]{1,%d}" % MAX_REQUEST_ID)
RECENT_EVENTS = 200  # the ring of recent fallbacks and errors shown on the status page


@dataclass(frozen=True, slots=True)
class Event:
    """One row of the recent-events ring: a request that fell back or failed."""

    at: float  # epoch seconds
    kind: str  # "fallback" | "error"
    endpoint: str
    alias: str
    candidate: str | None  # the one that answered, if any
    position: int | None  # its place in the chain (1 = first)
    status: int
    error_class: str | None
    request_id: str


def _status_class(record: RequestRecord) -> str | None:
    return "client_gone" if record.status == 499 else None


class Journal:
    """The recent-events ring of one gateway process, and its access log when switched on.

    The access log is written straight to a binary stream (standard error under ``interlock serve``),
    one JSON object and a newline per request, flushed at once: not through ``logging``, whose record
    objects, caller lookup and locks cost several times the line itself (bench/hot_path.py).
    """

    def __init__(self, *, access_log: BinaryIO | None = None, size: int = RECENT_EVENTS) -> None:
        self.access_log = access_log
        self._line: Callable[[RequestRecord, MillisClock], dict[str, Any]] | None = None
        if access_log is not None:  # the JSON access log: its line is access_json.py's, off by default
            from interlock.runtime.books.access_json import line

            self._line = line
        self.events: deque[Event] = deque(maxlen=size)
        self.requests = 0
        self._clock = MillisClock()
        self._id_prefix = secrets.token_hex(6)  # this process's ids: random prefix, then a counter
        self._ids = 0

    def request_id(self, headers: list[tuple[bytes, bytes]]) -> bytes:
        """The caller's ``X-Request-Id`` when it is 1-128 plain characters, else a new one (24 hex
        digits: a random per-process prefix and a counter, unique without a syscall per request)."""
        for name, value in headers:
            if name == REQUEST_ID_HEADER:
                if _PLAIN_ID.fullmatch(value):
                    return value
                break
        self._ids += 1
        return b"%s%012x" % (self._id_prefix.encode(), self._ids)

    def finish(self, record: RequestRecord) -> None:
        """The one call at the end of a request: O(1) unless it must write a log line. (The features'
        ``finish``, the audit line, comes after: ``request/lifecycle.py::_finish``.)"""
        self.requests += 1
        answered = record.answered
        fell_back = (
            answered is not None
            and record.target is not None
            and answered.candidate is not record.target.candidates[0]
        )
        if fell_back or record.status >= 400 or record.error is not None:
            self.events.append(self._event(record))
        stream = self.access_log
        if stream is not None:  # the request path reads one attribute while the access log is off
            line = self._line
            assert line is not None  # set with the stream
            try:
                stream.write(orjson.dumps(line(record, self._clock), option=orjson.OPT_APPEND_NEWLINE))
                stream.flush()
            except (OSError, ValueError) as exc:  # stderr closed or broken: say so once, stop logging
                self.access_log = None
                log.error("the access log could not be written (%s); it is off from now on", exc)

    def _event(self, record: RequestRecord) -> Event:
        answered, target = record.answered, record.target
        failed = record.status >= 400 or record.error is not None
        position = None
        if answered is not None and target is not None:
            position = target.candidates.index(answered.candidate) + 1
        return Event(
            at=record.wall,
            kind="error" if failed else "fallback",
            endpoint=record.endpoint,
            alias=label(target.label) if target is not None else "-",
            candidate=answered.candidate.id if answered is not None else None,
            position=position,
            status=record.status,
            error_class=error_class(record.error) if record.error is not None else _status_class(record),
            request_id=record.id.decode(),
        )
