"""OpenTelemetry tracing, optional: ``interlock serve --otel`` (the ``otel`` extra), a row of the feature
table (``features.FEATURES``, wanted by the serve settings' ``otel``).

Why this boundary: tracing must cost nothing when it is off, and the gateway must run without the
OpenTelemetry packages installed. This package is imported only with ``--otel``; nothing here imports
OpenTelemetry, ``open_tracing`` loads ``tracing/otel.py`` (which does). ``plug`` fills the lifecycle's
points: ``begin`` (the request's span), ``attempt`` (each upstream call's), ``skip`` (a candidate passed
over) and ``stop`` (the last spans exported). When it is off, the request path pays one ``is None`` test
per request and one per upstream call, and one context-variable read per upstream request.

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

from interlock.runtime.features import Feature, Settings
from interlock.runtime.features.tracing.base import TracingUnavailable

if TYPE_CHECKING:
    from interlock.runtime.features.tracing.otel import Tracing
    from interlock.runtime.request.services import RequestServices

__all__ = ["TracingUnavailable", "open_tracing", "plug"]

log = logging.getLogger("interlock.tracing")


def open_tracing(environ: Mapping[str, str]) -> Tracing | None:
    """The tracer of this process for ``--otel``, configured by ``OTEL_*`` in ``environ``; None when
    ``OTEL_SDK_DISABLED=true``. Raises ``TracingUnavailable`` without the packages."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        log.warning("--otel: OTEL_SDK_DISABLED=true, so no traces are recorded")
        return None
    try:
        from interlock.runtime.features.tracing.otel import build
    except ImportError as exc:
        raise TracingUnavailable(
            f"--otel needs the OpenTelemetry SDK and OTLP exporter ({exc.name or exc} is missing): "
            "pip install 'interlock[otel]'"
        ) from None
    return build(environ)


def plug(services: RequestServices, settings: Settings) -> Feature:
    """The tracing's hooks, for this process's tracer (none when ``OTEL_SDK_DISABLED=true``)."""
    tracing = open_tracing(settings.environ)
    if tracing is None:
        return Feature()
    return Feature(begin=tracing.begin, attempt=tracing.traced, skip=tracing.skipped, stop=tracing.close)
