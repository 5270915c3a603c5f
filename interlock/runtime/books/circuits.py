"""The state of one candidate's circuit and of one endpoint's (``health.HealthBook`` keeps them, keyed by
id and label), and why a candidate is held back (``Hold``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class CandidateState:
    failures: int = 0
    open_until: float = 0.0  # monotonic
    rate_limited_until: float = 0.0  # monotonic
    last_success_at: float | None = None  # wall clock; also when it was last selected (it answered)
    last_error_at: float | None = None
    last_error_status: int | None = None
    last_error_class: str | None = None
    slow_timeouts: int = 0  # timeouts while its endpoint was answering others: slow, not dead
    slow_streak: int = 0  # of those, since the last success
    busy_timeouts: int = 0  # first-byte timeouts while its server reported progress: never counted
    opened: int = 0  # times its circuit opened since the last success: the backoff's step
    connect_opened: bool = False  # the failure that last opened it was a connect failure
    check_failed: bool = False  # an active check failed since it opened
    last_check_at: float | None = None  # wall clock
    last_check_ok: bool | None = None
    next_check_at: float | None = None  # monotonic: set by the recovery checks while it is open


@dataclass(frozen=True, slots=True)
class Hold:
    """Why a candidate is held back (``rate_limited``/``circuit_open``), for how long, and what caused it."""

    reason: str
    seconds: float  # from now until it may be tried again
    error_class: str | None  # the failure that put it on hold
    status: int | None


@dataclass(slots=True)
class EndpointState:
    probe_ok: bool = True
    failures: int = 0
    open_until: float = 0.0
    last_probe_at: float | None = None
    last_probe_error: str | None = None
    last_success_at: float | None = None
    last_error_at: float | None = None
    last_error_class: str | None = None
    opened: int = 0  # times its circuit opened since the last success: the backoff's step
    reuse_off_until: float = 0.0  # its upstream sent bytes nobody asked for: connections not reused
