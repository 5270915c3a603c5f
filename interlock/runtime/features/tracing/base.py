"""What the tracing package shares without OpenTelemetry: the error of an ``--otel`` that cannot run.
(The upstream headers of a traced attempt, ``UPSTREAM_HEADERS``, are the exchange's: ``upstream.base``.)"""

from __future__ import annotations


class TracingUnavailable(Exception):
    """Tracing was asked for but cannot run: the message says what to install or change."""
