"""A gateway in a realistic state for the status page and ``interlock status``: two Ollama boxes and a
cloud on loopback (real fake servers), gpu-a's GPU readings from a real telemetry sidecar (its
nvidia-smi a script printing a captured H200 under load), one box killed, a circuit open, slots held by
slow streams."""

from __future__ import annotations

import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from interlock.runtime.telemetry.sidecar import PATH, Readings, make_server
from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from interlock.testing.replies import Reply
from tests.e2e.harness import Served
from tests.runtime.telemetry.conftest import load_as_runtime_query
from tests.waiting import wait_until

CONFIG = """\
version: 1
server: {{default_alias: team/chat, alias_namespace: team/}}
providers:
  box-a:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 120s, total: 300s}}
    workers:
      - name: gpu-a
        url: "{gpu_a}"
        telemetry: {{url: "{sidecar}"}}
        max_concurrent: 3
        model_concurrency: {{"*": 2}}
        queue: {{max_waiting: 4, max_wait: 10s}}
  box-b:
    kind: ollama
    probe: false  # its death is seen by the request that hits it (a circuit opens), not by a probe first
    timeouts: {{connect: 1s, first_byte: 120s, total: 300s}}
    workers: [{{name: gpu-b, url: "{gpu_b}", max_concurrent: 2}}]
  cloud:
    kind: openai
    base_url: "{cloud}/v1"
    api_key_env: CLOUD_KEY
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
health:
  probe_interval: 1s
  probe_timeout: 900ms  # generous: on a loaded CI machine a slow probe must not mark a live box down
  failure_threshold: 1
  open_for: 10m
aliases:
  team/chat: {{description: everyday chat, chain: [box-b/llama3.2:3b, box-a/llama3.2:3b, cloud/gpt-4o-mini]}}
  team/vision: {{description: images, chain: [box-b/gemma3:12b, cloud/gpt-4o]}}
{extra}"""
EXTRA = """\
  team/embed: {description: embeddings, chain: [box-a/nomic-embed-text]}
"""
CLOUD_KEY = "sk-cloud-SECRET-93c1d7"
HI = [{"role": "user", "content": "hi"}]


@dataclass
class Fleet:
    gpu_a: FakeOllama
    gpu_b: FakeOllama
    cloud: FakeOpenAI
    config: Path
    sidecar: str  # gpu-a's telemetry sidecar: a real one, its nvidia-smi a script printing an H200
    served: Served
    streams: list[threading.Thread] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)  # holds the streams of hold_slots

    def write_config(self, extra: str = "") -> None:
        urls = {"gpu_a": self.gpu_a.url, "gpu_b": self.gpu_b.url, "cloud": self.cloud.url}
        self.config.write_text(CONFIG.format(**urls, sidecar=self.sidecar, extra=extra))

    def gpu_read(self) -> bool:
        telemetry = self.served.health()["workers"]["gpu-a"].get("telemetry") or {}
        return telemetry.get("gpu") is not None

    def ask(self, model: str, *, stream: bool = False) -> httpx.Response:
        with httpx.Client(base_url=self.served.url, timeout=120) as http:
            body = {"model": model, "messages": HI, "stream": stream}
            return http.post("/v1/chat/completions", json=body)

    def hold_slots(self, count: int) -> None:
        """``count`` streams on gpu-a, each holding a slot: held before their first byte until
        ``let_go()`` (then slow), so a test reads the page while they are in use, however long it takes."""
        self.gpu_a.set_fault(Fault.hold(self.gate), model="llama3.2:3b", times=count)
        for _ in range(count):
            thread = threading.Thread(target=self.ask, args=("team/chat",), kwargs={"stream": True})
            thread.start()
            self.streams.append(thread)
        wait_until(
            lambda: self.served.health()["workers"]["gpu-a"]["slots_in_use"] >= count, 60, "slots in use"
        )

    def let_go(self) -> None:
        self.gate.set()
        self.gpu_a.clear_faults(model="llama3.2:3b")


def _sidecar(folder: Path) -> ThreadingHTTPServer:
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{load_as_runtime_query().rstrip()}\nEOF\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    readings = Readings(gpu=None, nvidia_smi=True, host_memory=True, timeout_s=30, command=str(smi))
    server = make_server("127.0.0.1", 0, readings)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _fleet(folder: Path, *args: str) -> Iterator[Fleet]:
    # gpu-b is first in team/chat: it answers until it dies; then gpu-a does, streaming slowly.
    gpu_a = FakeOllama(name="gpu-a", reply=Reply(text=" ".join(["word"] * 30), chunk_delay_s=0.15)).start()
    gpu_b = FakeOllama(name="gpu-b").start()
    cloud = FakeOpenAI(name="cloud", api_key=CLOUD_KEY).start()
    sidecar = _sidecar(folder)
    config = folder / "interlock.yaml"
    url = f"http://127.0.0.1:{sidecar.server_address[1]}{PATH}"
    fleet = Fleet(gpu_a, gpu_b, cloud, config, url, served=None)  # type: ignore[arg-type]
    fleet.write_config()
    try:
        fleet.served = Served(
            config, {"CLOUD_KEY": CLOUD_KEY}, folder / "serve.log", "--log-level", "debug", *args
        )
        yield fleet
    finally:
        fleet.let_go()
        for thread in fleet.streams:
            thread.join(60)
        if fleet.served is not None:
            fleet.served.stop()
        for server in (gpu_a, gpu_b, cloud):
            server.stop()
        sidecar.shutdown()
        sidecar.server_close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    yield from _fleet(tmp_path_factory.mktemp("ui-fleet"))
