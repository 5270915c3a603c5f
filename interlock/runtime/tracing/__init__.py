"""OpenTelemetry tracing, optional: ``interlock serve --otel`` (the ``otel`` extra).

Why this boundary: tracing must cost nothing when it is off, and the gateway must run without the
OpenTelemetry packages installed. Nothing here imports them; ``open_tracing`` loads ``tracing.otel``
(which does) only when tracing is asked for. When it is off, the request path pays one ``is None``
test per request and one per upstream call, and one context-variable read per upstream request.

What a trace holds (attributes only, never a prompt, an answer, a header value or a credential):
- one SERVER span per request on a surface, named ``METHOD /path``, a child of the caller's W3C
  ``traceparent`` when one came in;
- one CLIENT span per candidate called (``attempt provider/model``): alias, candidate, provider, worker,
  outcome (``ok``, ``failed``, ``refused``, ``cannot_serve``) and the error class; candidates skipped
  without a call (a guard, an open circuit, an adapter's refusal) are events on the request span;
- the attempt's ``traceparent`` is sent to the upstream (``upstream.base.UPSTREAM_HEADERS``, read
  by ``upstream.exchange``), so an upstream that traces continues the same trace.

Exporter, endpoint, sampler, service name: the standard ``OTEL_*`` variables (docs/observability.md).

    TracingUnavailable   --otel without the packages, or an exporter setting this build cannot honour
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from interlock.runtime.tracing.base import TracingUnavailable

if TYPE_CHECKING:
    from interlock.runtime.tracing.otel import Tracing

log = logging.getLogger("interlock.tracing")


def open_tracing(environ: Mapping[str, str]) -> Tracing | None:
    """The tracer of this process for ``--otel``, configured by ``OTEL_*`` in ``environ``; None when
    ``OTEL_SDK_DISABLED=true``. Raises ``TracingUnavailable`` without the packages."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        log.warning("--otel: OTEL_SDK_DISABLED=true, so no traces are recorded")
        return None
    try:
        from interlock.runtime.tracing.otel import build
    except ImportError as exc:
        raise TracingUnavailable(
            f"--otel needs the OpenTelemetry SDK and OTLP exporter ({exc.name or exc} is missing): "
            "pip install 'interlock[otel]'"
        ) from None
    return build(environ)
