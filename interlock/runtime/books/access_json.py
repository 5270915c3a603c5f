"""The JSON access log's line (``interlock serve --access-log json``; docs/operations.md lists its fields):
imported by a ``Journal`` given a stream, when the gateway is built; off by default, never loaded then."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from interlock.runtime.base.clock import MillisClock
from interlock.runtime.base.errors import AllCandidatesFailed, CandidateOutcome
from interlock.runtime.books.record import (
    CandidateRefused,
    RequestRecord,
    Walked,
    error_class,
    label,
    usage_of,
)


def line(record: RequestRecord, clock: MillisClock) -> dict[str, Any]:
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
        "time": clock.iso(record.wall),
        "request_id": record.id.decode(),
        "surface": surface.name if surface is not None else "openai",
        "endpoint": surface.route if surface is not None else record.endpoint,
        "stream": record.stream,
        "alias": label(target.label) if target is not None else None,
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
