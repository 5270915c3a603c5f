"""Tracing: spans per attempt (the SDK's in-memory exporter), and nothing loaded without ``--otel``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from interlock.runtime.base.errors import CannotServe, ClientError, NoCandidateCanServe, ServerError
from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics, StateView
from interlock.runtime.books.record import CandidateRefused
from interlock.runtime.features.tracing import open_tracing
from interlock.runtime.features.tracing.base import TracingUnavailable
from interlock.runtime.features.tracing.otel import Tracing
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.request.resolve import resolve
from interlock.runtime.request.router import Router
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.upstream.base import UPSTREAM_HEADERS
from interlock.runtime.wire.base import Endpoint, Native
from tests.runtime.conftest import in_fresh_process
from tests.runtime.scripted import ScriptedAdapter

BODY = {"model": "t/chat", "messages": [{"role": "user", "content": "PROMPT-CANARY"}]}
OK = {"object": "chat.completion", "choices": [{"message": {"content": "ANSWER-CANARY"}}]}


class HeaderAdapter(ScriptedAdapter):
    """Records the upstream headers the exchange would add (``UPSTREAM_HEADERS``) at each call."""

    def __init__(self, script: Mapping[str, Any], refuse: CannotServe | None = None) -> None:
        super().__init__(script, refuse)
        self.headers: list[Mapping[str, str] | None] = []

    async def chat(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> dict[str, Any]:
        self.headers.append(UPSTREAM_HEADERS.get())
        return await super().chat(endpoint, model, body)


def traced_walk(plan: RuntimePlan, adapter: ScriptedAdapter) -> tuple[InMemorySpanExporter, Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider)
    health = HealthBook(plan.health)
    metrics = Metrics(StateView(lambda: plan, health, MemorySlots()))
    router = Router(health, (), {"openai": adapter, "ollama": adapter}, metrics)
    router.attempt, router.skip = tracing.traced, tracing.skipped  # the row's seats (``features.tracing``)

    async def walk() -> Any:
        with tracing.tracer.start_as_current_span("request", kind=SpanKind.SERVER):
            return await router.chat(resolve(plan, "t/chat"), BODY)

    try:
        return exporter, asyncio.run(walk())
    except (CandidateRefused, NoCandidateCanServe) as exc:
        return exporter, exc


def test_each_called_candidate_is_a_child_span_and_its_traceparent_goes_upstream(
    basic_plan: RuntimePlan,
) -> None:
    adapter = HeaderAdapter({"m1": ServerError("down", status=503), "c1": OK})
    exporter, answered = traced_walk(basic_plan, adapter)
    assert answered.candidate.id == "cloud/c1"
    request, *_ = [s for s in exporter.get_finished_spans() if s.name == "request"]
    attempts = [s for s in exporter.get_finished_spans() if s.name.startswith("attempt")]
    assert [(s.name, s.attributes["interlock.outcome"]) for s in attempts] == [
        ("attempt local/m1", "failed"),
        ("attempt local/m1", "failed"),  # its retry (a 503 is safe to repeat)
        ("attempt cloud/c1", "ok"),
    ]
    assert all(s.parent is not None and s.parent.span_id == request.context.span_id for s in attempts)
    assert dict(attempts[0].attributes or {}) == {
        "interlock.alias": "t/chat",
        "interlock.candidate": "local/m1",
        "interlock.provider": "local",
        "interlock.worker": "box1",
        "interlock.outcome": "failed",
        "error.type": "server_error",
    }
    trace_id = f"{request.context.trace_id:032x}"
    assert adapter.headers == [
        {"traceparent": f"00-{trace_id}-{s.context.span_id:016x}-{s.context.trace_flags:02x}"}
        for s in attempts
    ]
    assert UPSTREAM_HEADERS.get() is None  # reset after each call
    assert all(
        "CANARY" not in str(v) for s in exporter.get_finished_spans() for v in (s.attributes or {}).values()
    )


def test_a_refused_and_a_skipped_candidate(basic_plan: RuntimePlan) -> None:
    exporter, refused = traced_walk(basic_plan, HeaderAdapter({"m1": ClientError("bad", status=400)}))
    assert isinstance(refused, CandidateRefused)
    (attempt,) = [s for s in exporter.get_finished_spans() if s.name.startswith("attempt")]
    assert (attempt.attributes or {})["interlock.outcome"] == "refused"

    exporter, _ = traced_walk(
        basic_plan, HeaderAdapter({}, refuse=CannotServe("n: 2 is not supported", param="n"))
    )
    (request,) = exporter.get_finished_spans()
    assert [(e.name, dict(e.attributes or {})) for e in request.events if e.name != "exception"] == [
        ("candidate skipped", {"interlock.candidate": c, "interlock.reason": "unsupported_n"})
        for c in ("local/m1", "cloud/c1", "free/f1")
    ]


def test_exporters_are_a_table_and_bad_settings_are_refused() -> None:
    with pytest.raises(
        TracingUnavailable,
        match=r"^OTEL_TRACES_EXPORTER: unknown exporter\(s\) zipkin; expected otlp, console, none$",
    ):
        open_tracing({"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(
        TracingUnavailable, match=r"^OTEL_EXPORTER_OTLP_PROTOCOL='http/json' is not supported"
    ):
        open_tracing({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    assert open_tracing({"OTEL_SDK_DISABLED": "true"}) is None
    tracing = open_tracing({"OTEL_TRACES_EXPORTER": "none"})
    assert tracing is not None
    assert tracing.provider.resource.attributes["service.name"] == "interlock"


def test_without_otel_nothing_is_imported_and_otel_says_what_to_install(tmp_path: Path) -> None:
    program = (
        "import sys, asyncio\n"
        "sys.modules['opentelemetry'] = None  # as if the otel extra were not installed\n"
        "from interlock.runtime.features.tracing import open_tracing, TracingUnavailable\n"
        "try:\n"
        "    open_tracing({})\n"
        "except TracingUnavailable as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == (
        "--otel needs the OpenTelemetry SDK and OTLP exporter (opentelemetry is missing): "
        "pip install 'interlock[otel]'"
    )


def test_a_request_without_otel_loads_no_tracer(tmp_path: Path, basic_plan: RuntimePlan) -> None:
    program = (
        "sent = []\n"
        'body = b\'{"model": "t/none", "messages": [{"role": "user", "content": "hi"}]}\'\n'
        "async def receive(): return {'type': 'http.request', 'body': body}\n"
        "async def send(m): sent.append(m)\n"
        "scope = {'type': 'http', 'method': 'POST', 'path': '/v1/chat/completions', 'headers': [\n"
        "         (b'traceparent', b'00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')]}\n"
        "asyncio.run(gateway(scope, receive, send))\n"
        "loaded = ('opentelemetry.sdk', 'opentelemetry.exporter',\n"
        "          'interlock.runtime.features.tracing.otel')\n"
        "print(sent[0]['status'], sorted(m for m in sys.modules if m.startswith(loaded)))\n"
    )
    # (a library may import the OpenTelemetry *API* by itself when it is installed; the SDK is ours to load)
    assert in_fresh_process(tmp_path, basic_plan, program) == "404 []"
