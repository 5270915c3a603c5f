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
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from interlock.runtime.base.clock import MillisClock
from interlock.runtime.base.errors import AllCandidatesFailed, CandidateOutcome
from interlock.runtime.books.record import CandidateRefused, RequestRecord, Walked, error_class, usage_of

log = logging.getLogger("interlock.access")

REQUEST_ID_HEADER = b"x-request-id"
MAX_REQUEST_ID = 128
_PLAIN_ID = re.compile(rb"[A-Za-z0-9._:/+=@-]{1,%d}" % MAX_REQUEST_ID)
RECENT_EVENTS = 200  # the ring of recent fallbacks and errors shown on the status page
MAX_LABEL = 120  # a raw provider/model label comes from the caller: shown cut short


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


def _label(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


class Journal:
    """The recent-events ring of one gateway process, and its access log when switched on.

    The access log is written straight to a binary stream (standard error under ``interlock serve``),
    one JSON object and a newline per request, flushed at once: not through ``logging``, whose record
    objects, caller lookup and locks cost several times the line itself (bench/hot_path.py).
    """

    def __init__(self, *, access_log: BinaryIO | None = None, size: int = RECENT_EVENTS) -> None:
        self.access_log = access_log
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
        if stream is not None:
            try:
                stream.write(orjson.dumps(self.line(record), option=orjson.OPT_APPEND_NEWLINE))
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
            alias=_label(target.label) if target is not None else "-",
            candidate=answered.candidate.id if answered is not None else None,
            position=position,
            status=record.status,
            error_class=error_class(record.error) if record.error is not None else _status_class(record),
            request_id=record.id.decode(),
        )

    def line(self, record: RequestRecord) -> dict[str, Any]:
        """The access-log object of one request (docs/operations.md lists its fields)."""
        now = time.perf_counter()
        total = now - record.started
        answered, target, surface = record.answered, record.target, record.surface
        if answered is not None:
            upstream: float | None = answered.upstream_s
            queued: float | None = answered.queued_s
            attempts: Sequence[CandidateOutcome] = answered.attempts
            candidate: str | None = answered.candidate.id
        else:  # every candidate failed, one refused, or the caller left while one was called
            upstream, queued, candidate = _walked(record.walk, now), None, _refused(record)
            attempts = (
                _outcomes(record.error) or (record.walk.attempts if record.walk is not None else None) or ()
            )
        relay = record.relay_s if record.stream and answered is not None else None
        usage = usage_of(record)
        return {
            "time": self._clock.iso(record.wall),
            "request_id": record.id.decode(),
            "surface": surface.name if surface is not None else "openai",
            "endpoint": surface.route if surface is not None else record.endpoint,
            "stream": record.stream,
            "alias": _label(target.label) if target is not None else None,
            "candidate": candidate,
            "worker": answered.route.worker if answered is not None else None,
            "attempts": [
                {
                    "candidate": o.candidate,
                    "error_class": o.error_class,
                    "status": o.status,
                    "called": o.called,
                    "retry": o.retry,
                }
                for o in attempts
            ],
            "status": record.status,
            "error_class": error_class(record.error),
            "duration_ms": {
                "total": _ms(total),
                "upstream": _ms(upstream),
                "queued": _ms(queued),
                "relay": _ms(relay),
                "overhead": _ms(total - (upstream or 0.0) - (queued or 0.0) - (relay or 0.0)),
            },
            "tokens": usage,
            "key": record.caller.key_id,
            "tenant": record.caller.tenant,
        }


def _walked(walk: Walked | None, now: float) -> float | None:
    """The seconds a walk without an answer spent on upstream calls, the one in flight included (None:
    it called none)."""
    if walk is None:
        return None
    spent = walk.walked_s + (now - walk.calling_since if walk.calling is not None else 0.0)
    return spent if spent > 0 or walk.calling is not None else None


def _refused(record: RequestRecord) -> str | None:
    """The candidate a request without an answer ended at: the one that refused it (a 4xx passed on), or
    the one called when the caller left; None when every candidate failed (``attempts`` lists them)."""
    if isinstance(record.error, CandidateRefused):
        return record.error.candidate.id
    walk = record.walk
    return walk.calling if walk is not None else None


def _outcomes(error: BaseException | None) -> tuple[CandidateOutcome, ...]:
    """The candidates a failed walk went through (``AllCandidatesFailed`` lists them)."""
    return error.outcomes if isinstance(error, AllCandidatesFailed) else ()


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)
