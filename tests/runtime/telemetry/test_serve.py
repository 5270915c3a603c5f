"""End to end: `interlock serve` and `interlock telemetry-sidecar` as real processes on loopback, with a
fake nvidia-smi on their PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from interlock.runtime.telemetry.readings import MIB
from interlock.testing.fake_ollama import FakeOllama
from tests.e2e.harness import Served, compile_to
from tests.runtime.telemetry.conftest import FakeSmi, load_as_runtime_query, printing
from tests.waiting import wait_until

CONFIG = """\
version: 1
providers:
  local:
    kind: ollama
    workers:
      - {{name: near, url: "{box}", telemetry: {{gpu: 0, nvidia_smi: true, host_memory: true}}}}
      - {{name: far, url: "{far}", telemetry: {{gpu: 0, url: "{sidecar}"}}}}
      - {{name: quiet, url: "{quiet}"}}
health: {{probe_interval: 1s, probe_timeout: 800ms}}
aliases:
  t/chat: {{chain: [local/llama3.2:3b]}}
"""


@pytest.fixture
def sidecar(fake_smi: FakeSmi) -> Iterator[str]:
    """`interlock telemetry-sidecar --port 0` with the fake nvidia-smi first on its PATH."""
    fake_smi(printing(load_as_runtime_query()), name="sidecar-bin")
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock", "telemetry-sidecar", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env={**os.environ},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    try:
        assert line.startswith("interlock telemetry-sidecar serving http://127.0.0.1:"), line
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()


def test_the_sidecar_serves_the_document(sidecar: str) -> None:
    doc = httpx.get(sidecar).json()
    assert doc["format"] == "interlock-telemetry/1"
    assert doc["errors"] == {}
    [gpu] = doc["gpus"]
    assert (gpu["index"], gpu["name"], gpu["vram_used_bytes"]) == (0, "NVIDIA H200", 30775 * MIB)
    assert "uuid" not in gpu
    assert doc["host"]["memory_total_bytes"] > 0
    assert httpx.get(sidecar.replace("/telemetry", "/other")).status_code == 404


def test_serve_reads_what_is_declared_and_nothing_else(
    tmp_path: Path, sidecar: str, fake_smi: FakeSmi
) -> None:
    local = fake_smi(printing(load_as_runtime_query().replace(", 30775, ", ", 2048, ")), name="serve-bin")
    with FakeOllama(name="near") as near, FakeOllama(name="far") as far, FakeOllama(name="quiet") as quiet:
        text = CONFIG.format(box=near.url, far=far.url, quiet=quiet.url, sidecar=sidecar)
        plan = compile_to(tmp_path / "c.yaml", text, tmp_path / "plan.json")
        served = Served(plan, {"PATH": os.environ["PATH"]}, tmp_path / "serve.log")
        try:
            wait_until(
                lambda: (
                    served.metric("interlock_telemetry_reads_total", worker="near", source="nvidia_smi") >= 2
                    and served.metric("interlock_telemetry_reads_total", worker="far", source="url") >= 2
                ),
                30,
                "two telemetry rounds",
            )
            vram = served.metric("interlock_worker_vram_used_bytes", worker="near")
            far_vram = served.metric("interlock_worker_vram_used_bytes", worker="far")
            power = served.metric("interlock_worker_gpu_power_watts", worker="far")
            workers = served.health()["workers"]
            metrics = served.http.get("/metrics").text
        finally:
            served.stop()
    assert (vram, far_vram, power) == (2048 * MIB, 30775 * MIB, 692.16)
    assert {call.split()[-1] for call in (local / "calls").read_text().splitlines()} == {"--id=0"}
    assert "telemetry" not in workers["quiet"]
    assert 'worker="quiet"' not in "\n".join(
        line
        for line in metrics.splitlines()
        if line.startswith(("interlock_worker_", "interlock_telemetry_"))
    )
    near_report = workers["near"]["telemetry"]
    assert near_report["sources"]["nvidia_smi"]["ok"] is True
    assert near_report["gpu"]["name"] == "NVIDIA H200"
    assert near_report["memory_total_bytes"] > 0
    assert workers["far"]["telemetry"]["sources"]["url"]["error_class"] is None
