"""The telemetry loop in process: real fake nvidia-smi on PATH, a real sidecar on loopback, real plans."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics, StateView
from interlock.runtime.loaded.plan import RuntimePlan, load_plan
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.telemetry.collector import TelemetryBook, TelemetryLoop
from interlock.runtime.telemetry.gauges import families
from interlock.runtime.telemetry.readings import MIB
from interlock.runtime.telemetry.sidecar import PATH, Readings, make_server
from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.faults import Fault
from tests.runtime.conftest import compile_text
from tests.runtime.telemetry.conftest import FakeSmi, load_as_runtime_query, printing

PLAN = """\
version: 1
providers:
  local:
    kind: ollama
    workers:
      - {{name: near, url: "http://127.0.0.1:9/", telemetry: {{nvidia_smi: true, host_memory: true}}}}
      - {{name: far, url: "http://127.0.0.2:9/", telemetry: {{gpu: 0, url: "{sidecar}"}}}}
      - {{name: mac, url: "http://127.0.0.3:9/", profile: mac-studio-256g, telemetry: {{url: "{sidecar}"}}}}
      - {{name: quiet, url: "http://127.0.0.4:9/"}}
health: {{probe_interval: 30s, probe_timeout: 2s}}
aliases:
  t/chat: {{chain: [local/m1]}}
"""


@pytest.fixture
def sidecar(fake_smi: FakeSmi) -> Iterator[str]:
    """A real sidecar on loopback (in a thread) whose nvidia-smi, a fake, reports the H200 under load."""
    smi = fake_smi(printing(load_as_runtime_query()), name="sidecar-bin") / "nvidia-smi"
    readings = Readings(gpu=None, nvidia_smi=True, host_memory=True, timeout_s=30, command=str(smi))
    server = make_server("127.0.0.1", 0, readings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}{PATH}"
    server.shutdown()
    server.server_close()


def _plan(tmp_path: Path, text: str) -> RuntimePlan:
    return load_plan(compile_text(tmp_path, text), {})


def _round(plan: RuntimePlan) -> tuple[TelemetryLoop, TelemetryBook]:
    book = TelemetryBook()
    loop = TelemetryLoop(lambda: plan, book)

    async def one_round() -> None:
        await loop.collect_all()
        await loop.stop()

    asyncio.run(one_round())
    return loop, book


def _samples(plan: RuntimePlan, book: TelemetryBook) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    gauges = partial(families, book)
    metrics = Metrics(StateView(lambda: plan, HealthBook(plan.health), MemorySlots(), gauges=gauges))
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            if s.name.startswith(("interlock_worker_", "interlock_telemetry_")):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_each_worker_is_read_from_what_it_declares(tmp_path: Path, sidecar: str, fake_smi: FakeSmi) -> None:
    local = fake_smi(printing(load_as_runtime_query().replace(", 30775, ", ", 1000, ")), name="local-bin")
    plan = _plan(tmp_path, PLAN.format(sidecar=sidecar))
    _, book = _round(plan)
    assert sorted(book.workers) == ["far", "mac", "near"]  # `quiet` declares nothing
    assert len((local / "calls").read_text().splitlines()) == 1  # only `near` runs nvidia-smi here
    near, far, mac = book.workers["near"], book.workers["far"], book.workers["mac"]
    assert near.vram() == (1000 * MIB, 143771 * MIB)
    assert near.host is not None
    assert near.host.total_bytes is not None
    assert far.vram() == (30775 * MIB, 143771 * MIB)  # from the sidecar's H200
    # The mac's plan says unified memory, but the sidecar also reports a GPU 0: the GPU's own memory wins.
    assert mac.unified
    report = book.report("near")
    assert report is not None
    assert report["sources"]["nvidia_smi"]["ok"] is True
    assert report["sources"]["host_memory"]["error_class"] is None


def test_unified_memory_is_the_vram_of_an_apple_box(tmp_path: Path) -> None:
    """A sidecar that reports no GPU (macOS) but the host's memory: VRAM is that memory."""
    server = make_server("127.0.0.1", 0, Readings(gpu=None, nvidia_smi=False, host_memory=True, timeout_s=5))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}{PATH}"
        text = PLAN.format(sidecar=url).replace("telemetry: {gpu: 0, url:", "telemetry: {url:")
        plan = _plan(tmp_path, text)
        _, book = _round(plan)
    finally:
        server.shutdown()
        server.server_close()
    mac, far = book.workers["mac"], book.workers["far"]
    assert mac.host is not None
    assert mac.vram() == (mac.host.used_bytes, mac.host.total_bytes)
    assert far.vram() == (None, None)  # not a unified-memory box, and no GPU reported
    samples = _samples(plan, book)
    assert samples[("interlock_worker_vram_total_bytes", (("worker", "mac"),))] == mac.host.total_bytes
    assert ("interlock_worker_vram_total_bytes", (("worker", "far"),)) not in samples


def test_remote_values_override_local_ones(tmp_path: Path, sidecar: str, fake_smi: FakeSmi) -> None:
    fake_smi(printing(load_as_runtime_query().replace(", 55, ", ", 70, ")), name="local-bin")
    text = PLAN.format(sidecar=sidecar).replace(
        "{nvidia_smi: true, host_memory: true}", f'{{nvidia_smi: true, url: "{sidecar}"}}'
    )
    _, book = _round(_plan(tmp_path, text))
    near = book.workers["near"]
    assert near.local_gpu is not None
    assert near.local_gpu.temperature_celsius == 70.0
    assert near.gpu is not None
    assert near.gpu.temperature_celsius == 55.0  # the sidecar's


def test_failing_sources_drop_their_values_and_say_why(tmp_path: Path, fake_smi: FakeSmi) -> None:
    bin_dir = fake_smi(printing(load_as_runtime_query()), name="local-bin")
    text = PLAN.format(sidecar="http://127.0.0.1:9/telemetry")  # nothing listens on port 9
    plan = _plan(tmp_path, text)
    book = TelemetryBook()
    loop = TelemetryLoop(lambda: plan, book)

    async def rounds() -> None:
        await loop.collect_all()
        assert book.workers["near"].gpu is not None
        (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")
        await loop.collect_all()
        await loop.stop()

    asyncio.run(rounds())
    near, far = book.workers["near"], book.workers["far"]
    assert near.gpu is None
    assert near.sources["nvidia_smi"].error_class == "failed"
    assert near.sources["nvidia_smi"].last_ok_at is not None
    assert far.sources["url"].error_class == "failed"
    samples = _samples(plan, book)
    assert ("interlock_worker_vram_used_bytes", (("worker", "near"),)) not in samples
    reads = {
        labels: value
        for (name, labels), value in samples.items()
        if name == "interlock_telemetry_reads_total"
    }
    assert reads[(("result", "ok"), ("source", "nvidia_smi"), ("worker", "near"))] == 1
    assert reads[(("result", "failed"), ("source", "nvidia_smi"), ("worker", "near"))] == 1
    assert reads[(("result", "failed"), ("source", "url"), ("worker", "far"))] == 2


def test_a_plan_without_telemetry_reads_nothing(tmp_path: Path, fake_smi: FakeSmi) -> None:
    bin_dir = fake_smi(printing(load_as_runtime_query()), name="local-bin")
    text = PLAN.format(sidecar="http://127.0.0.1:9/telemetry")
    text = "\n".join(
        line.split(", telemetry:")[0] + "}" if "telemetry:" in line else line for line in text.splitlines()
    )
    plan = _plan(tmp_path, text)
    assert all(w.telemetry is None for w in plan.source.workers.values())
    loop, book = _round(plan)
    assert not (bin_dir / "calls").exists()
    assert book.workers == {}
    assert loop._client is None  # no HTTP client was even opened
    assert {name for name, _ in _samples(plan, book)} == set()


def test_a_reload_that_drops_telemetry_forgets_the_readings(tmp_path: Path, sidecar: str) -> None:
    with_telemetry = _plan(tmp_path, PLAN.format(sidecar=sidecar))
    text = PLAN.format(sidecar=sidecar).replace(", telemetry: {gpu: 0, url: " + f'"{sidecar}"' + "}", "")
    without_far = _plan(tmp_path, text)
    current = [with_telemetry]
    book = TelemetryBook()
    loop = TelemetryLoop(lambda: current[0], book)

    async def rounds() -> None:
        await loop.collect_all()
        assert "far" in book.workers
        current[0] = without_far
        await loop.collect_all()
        await loop.stop()

    asyncio.run(rounds())
    assert "far" not in book.workers
    assert "near" in book.workers


@pytest.mark.parametrize(
    ("path", "fault", "error_class"),
    [
        ("/api/tags", Fault.hang(), "timeout"),  # accepted, never answered
        ("/api/version", None, "malformed"),  # JSON, but not the telemetry document
        ("/nowhere", None, "failed"),  # HTTP 404
        ("/api/tags", Fault.cut_stream(0), "failed"),  # the connection is reset mid-answer
    ],
)
def test_a_sidecar_that_misbehaves(tmp_path: Path, path: str, fault: Fault | None, error_class: str) -> None:
    with FakeOllama(name="not-a-sidecar") as fake:
        if fault is not None:
            fake.set_fault(fault)
        text = PLAN.format(sidecar=f"{fake.url}{path}")
        if error_class == "timeout":  # only the hang needs a short deadline: the others keep 2 s
            text = text.replace("probe_timeout: 2s", "probe_timeout: 300ms")
        plan = _plan(tmp_path, text)
        _, book = _round(plan)
    far = book.workers["far"]
    assert far.sources["url"].error_class == error_class
    assert (far.gpu, far.host) == (None, None)


def test_what_the_sidecar_could_not_read_is_shown(tmp_path: Path) -> None:
    readings = Readings(
        gpu=None, nvidia_smi=True, host_memory=True, timeout_s=30, command="/absent/nvidia-smi"
    )
    server = make_server("127.0.0.1", 0, readings)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        plan = _plan(tmp_path, PLAN.format(sidecar=f"http://127.0.0.1:{server.server_address[1]}{PATH}"))
        _, book = _round(plan)
    finally:
        server.shutdown()
        server.server_close()
    report = book.report("far")
    assert report is not None
    assert report["sidecar_errors"] == {"nvidia_smi": "missing"}
    assert report["sources"]["url"]["ok"] is True  # the sidecar answered; its GPU source did not
    assert report["gpu"] is None
    assert report["memory_total_bytes"] is not None
