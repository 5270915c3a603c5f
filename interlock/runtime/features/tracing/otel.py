"""The OpenTelemetry side of tracing: imported only by ``open_tracing`` (``--otel``), never otherwise.

``build`` makes this process's ``TracerProvider`` from the standard variables: ``OTEL_TRACES_EXPORTER``
(a row of ``EXPORTERS``), ``OTEL_EXPORTER_OTLP_*`` (the OTLP exporter reads them), ``OTEL_TRACES_SAMPLER``
(the SDK reads it), ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (``service.name`` defaults to
``interlock``), ``OTEL_BSP_*`` (the batch processor: spans are exported by its thread, off the loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from interlock.runtime.base.errors import (
    CannotServe,
    ContextOverflow,
    DeterministicError,
    TransientError,
    UpstreamError,
)
from interlock.runtime.books.record import error_class, usage_of
from interlock.runtime.features.tracing.base import TracingUnavailable
from interlock.runtime.upstream.base import UPSTREAM_HEADERS

if TYPE_CHECKING:
    from interlock.runtime.books.record import RequestRecord
    from interlock.runtime.loaded.tables import Candidate, Route, Target
    from interlock.runtime.upstream.base import Call

T = TypeVar("T")

_INCOMING = (b"traceparent", b"tracestate")  # the only request headers a trace reads
MAX_LABEL = 200  # a raw provider/model comes from the caller: cut short in attributes


def _cut(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


OUTCOMES: tuple[tuple[type[BaseException], str], ...] = (
    (CannotServe, "cannot_serve"),  # the adapter refused before sending anything
    (TransientError, "failed"),  # the walk goes on to the next candidate
    (DeterministicError, "refused"),  # a 4xx or unreadable answer, passed on to the caller
    (ContextOverflow, "context_too_small"),  # the walk goes on to a candidate with a larger context
)
"""An attempt's ``interlock.outcome`` by the class it ended with (anything else: ``internal``)."""


def _otlp(environ: Mapping[str, str]) -> SpanExporter:
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    ).strip() or "http/protobuf"
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                OTLPSpanExporter as GrpcExporter,
            )
        except ImportError:
            raise TracingUnavailable(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc "
                "(the `otel` extra ships http/protobuf)"
            ) from None
        exporter: SpanExporter = GrpcExporter()
        return exporter
    raise TracingUnavailable(
        f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported; use http/protobuf (the default) or grpc"
    )


def _console(environ: Mapping[str, str]) -> SpanExporter:
    return ConsoleSpanExporter()


EXPORTERS: Mapping[str, Callable[[Mapping[str, str]], SpanExporter] | None] = {
    "otlp": _otlp,
    "console": _console,
    "none": None,
}
"""``OTEL_TRACES_EXPORTER`` values (comma-separated; default ``otlp``)."""


def build(environ: Mapping[str, str]) -> Tracing:
    """This process's tracer, configured by the ``OTEL_*`` variables."""
    names = [n.strip() for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    unknown = [n for n in names if n not in EXPORTERS]
    if unknown:
        raise TracingUnavailable(
            f"OTEL_TRACES_EXPORTER: unknown exporter(s) {', '.join(unknown)}; expected {', '.join(EXPORTERS)}"
        )
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "interlock"}))
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    for name in names:
        make = EXPORTERS[name]
        if make is not None:
            provider.add_span_processor(BatchSpanProcessor(make(environ)))
    return Tracing(provider)


class Tracing:
    """The spans of one gateway process (built once; shared by every request)."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("interlock")
        self.propagator = TraceContextTextMapPropagator()

    def begin(self, scope: Mapping[str, Any], record: RequestRecord) -> RequestTrace:
        """The request's SERVER span, current in this task until ``RequestTrace.end``."""
        carrier = {}
        for name, value in scope["headers"]:
            if name in _INCOMING:
                carrier[name.decode()] = value.decode("latin-1")
        parent = self.propagator.extract(carrier) if carrier else None
        method, path = scope["method"], scope["path"]  # a path from the route table: no caller text
        span = self.tracer.start_span(
            f"{method} {path}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": method,
                "url.path": path,
                "interlock.request_id": record.id.decode(),
            },
        )
        return RequestTrace(span, otel_context.attach(trace.set_span_in_context(span)))

    def traced(self, call: Call[T], target: Target, candidate: Candidate, route: Route) -> Call[T]:
        """``call`` inside the candidate's CLIENT span, its ``traceparent`` sent upstream."""
        tracer, propagator = self.tracer, self.propagator

        async def attempt(*args: Any) -> T:
            attributes = {
                "interlock.alias": _cut(target.label),
                "interlock.candidate": _cut(candidate.id),
                "interlock.provider": candidate.provider,
            }
            if route.worker is not None:
                attributes["interlock.worker"] = route.worker
            span = tracer.start_span(
                f"attempt {_cut(candidate.id)}", kind=SpanKind.CLIENT, attributes=attributes
            )
            carrier: dict[str, str] = {}
            propagator.inject(carrier, context=trace.set_span_in_context(span))
            token = UPSTREAM_HEADERS.set(carrier)
            try:
                result = await call(*args)
            except BaseException as exc:
                outcome = next((name for kind, name in OUTCOMES if isinstance(exc, kind)), "internal")
                span.set_attribute("interlock.outcome", outcome)
                span.set_attribute("error.type", _error_type(exc))
                span.set_status(Status(StatusCode.ERROR, _error_type(exc)))
                raise
            else:
                span.set_attribute("interlock.outcome", "ok")
                return result
            finally:
                UPSTREAM_HEADERS.reset(token)
                span.end()

        return attempt

    @staticmethod
    def skipped(candidate: Candidate, reason: str) -> None:
        """A candidate passed over without a call: an event on the request's span."""
        trace.get_current_span().add_event(
            "candidate skipped", {"interlock.candidate": _cut(candidate.id), "interlock.reason": reason}
        )

    async def close(self) -> None:
        """Export what is buffered and stop (in a thread: the exporter may wait on the network)."""
        await asyncio.to_thread(self.provider.shutdown)


def _error_type(exc: BaseException) -> str:
    if isinstance(exc, UpstreamError):
        return exc.error_class
    if isinstance(exc, CannotServe):
        return exc.reason
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return "internal"


class RequestTrace:
    """One request's span and the context token that made it current; ``end`` once, at the end."""

    __slots__ = ("span", "token")

    def __init__(self, span: Span, token: object) -> None:
        self.span = span
        self.token = token

    def end(self, record: RequestRecord) -> None:
        span = self.span
        answered, target, caller = record.answered, record.target, record.caller
        attributes: dict[str, str | int | bool] = {
            "http.response.status_code": record.status,
            "interlock.endpoint": record.endpoint,
            "interlock.stream": record.stream,
        }
        if target is not None:
            attributes["interlock.alias"] = _cut(target.label)
        if answered is not None:
            attributes["interlock.candidate"] = _cut(answered.candidate.id)
            if answered.route.worker is not None:
                attributes["interlock.worker"] = answered.route.worker
        if caller.key_id is not None:
            attributes["interlock.key_id"] = caller.key_id
        if caller.tenant is not None:
            attributes["interlock.tenant"] = caller.tenant
        usage = usage_of(record)
        if usage is not None:
            for name, key in (("input", "prompt_tokens"), ("output", "completion_tokens")):
                if key in usage:
                    attributes[f"gen_ai.usage.{name}_tokens"] = usage[key]
        failed = error_class(record.error)
        if failed is not None:
            attributes["error.type"] = failed
        span.set_attributes(attributes)
        if record.status >= 500:
            span.set_status(Status(StatusCode.ERROR, failed or str(record.status)))
        span.end()
        otel_context.detach(self.token)  # type: ignore[arg-type]
