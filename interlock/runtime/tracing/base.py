"""What the tracing package shares without OpenTelemetry: the upstream headers of a traced attempt,
and the error of an ``--otel`` that cannot run."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar

UPSTREAM_HEADERS: ContextVar[Mapping[str, str] | None] = ContextVar(
    "interlock_upstream_headers", default=None
)
"""Headers for the upstream request being sent in this task (``traceparent``), set only while a
traced attempt is calling its upstream."""


class TracingUnavailable(Exception):
    """Tracing was asked for but cannot run: the message says what to install or change."""
