"""Health as the ops app reports it (``/v1/health``, the status page): labels, times, status codes and short
error classes only, never bodies, messages or credentials. Imported by the first report."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from interlock.runtime.base.clock import iso_utc
from interlock.runtime.books.circuits import CandidateState, EndpointState


def candidate_report(state: CandidateState, now: float, wall: float) -> dict[str, Any]:
    """A candidate's circuit as ``/v1/health`` shows it (``now``: monotonic, ``wall``: epoch seconds)."""
    wall_at = _clock(now, wall)
    until = max(state.open_until, state.rate_limited_until)
    return {
        "circuit_open_until": wall_at(until) if until > now else None,
        "next_trial_at": wall_at(state.open_until) if state.open_until > now else None,
        "trials_failed": max(state.opened - 1, 0),
        "last_check_at": iso_utc(state.last_check_at),
        "last_check_ok": state.last_check_ok,
        "next_check_at": wall_at(state.next_check_at)
        if state.next_check_at is not None and state.open_until > now
        else None,
        "last_selected": iso_utc(state.last_success_at),  # the router selects the one that answers
        "last_success_at": iso_utc(state.last_success_at),
        "last_error_at": iso_utc(state.last_error_at),
        "last_error_status": state.last_error_status,
        "last_error_class": state.last_error_class,
        "consecutive_failures": state.failures,
        "slow_timeouts": state.slow_timeouts,
        "busy_timeouts": state.busy_timeouts,
    }


def endpoint_report(state: EndpointState, now: float, wall: float) -> dict[str, Any]:
    """An endpoint's health as ``/v1/health`` shows it."""
    wall_at = _clock(now, wall)
    return {
        "healthy": state.probe_ok and state.open_until <= now,
        "probe_ok": state.probe_ok,
        "circuit_open_until": wall_at(state.open_until) if state.open_until > now else None,
        "last_probe_at": iso_utc(state.last_probe_at),
        "last_probe_error_class": state.last_probe_error,
        "last_success_at": iso_utc(state.last_success_at),
        "last_error_at": iso_utc(state.last_error_at),
        "last_error_class": state.last_error_class,
        "consecutive_connect_failures": state.failures,
        # caught sending bytes nobody asked for: one connection per exchange until then
        "connection_reuse_off_until": (
            wall_at(state.reuse_off_until) if state.reuse_off_until > now else None
        ),
    }


def _clock(now: float, wall: float) -> Callable[[float], str | None]:
    """A monotonic time as the wall-clock time it will be (ISO 8601)."""
    return lambda monotonic: iso_utc(wall + (monotonic - now))
