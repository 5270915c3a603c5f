"""Placement on the status page, in a real headless Chromium: `interlock serve` (a real process, its
loops on) warms the placed models of two simulated GPU boxes by itself, and the page shows each box's
homes, their sizes and what the warm-up found."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interlock.testing.fake_fleet import GIB, FakeGpuBox, sim_model
from tests.e2e.harness import Served, compile_to
from tests.runtime.ops.ui.browser import browser
from tests.waiting import wait_until

CONFIG = """\
version: 1
server: {{alias_namespace: t/}}
health: {{probe_interval: 1s, probe_timeout: 900ms}}
routing:
  placement: {{warm: true, keep_alive: 24h}}
models:
  local/qwen3:8b: {{size_gib: 6}}
  local/gemma3:12b: {{size_gib: 9}}
providers:
  local:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
    workers:
      - {{name: gpu-a, url: "{a}", memory_gib: 16}}
      - {{name: gpu-b, url: "{b}", memory_gib: 16}}
aliases:
  t/chat: {{chain: [local/qwen3:8b, local/gemma3:12b]}}
  t/vision: {{chain: [local/gemma3:12b]}}
"""


def box(name: str) -> FakeGpuBox:
    models = [sim_model("qwen3:8b", 6, load_s=0.05), sim_model("gemma3:12b", 9, load_s=0.05)]
    return FakeGpuBox(name=name, models=models, vram_bytes=16 * GIB)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, FakeGpuBox, FakeGpuBox]]:
    with box("gpu-a") as a, box("gpu-b") as b:
        plan = compile_to(tmp_path / "c.yaml", CONFIG.format(a=a.url, b=b.url), tmp_path / "plan.json")
        gateway = Served(plan, {}, tmp_path / "serve.log")
        try:
            yield gateway, a, b
        finally:
            gateway.stop()


def states(gateway: Served) -> dict[str, list[tuple[str, str]]]:
    homes = gateway.health()["placement"]["homes"]
    return {w: [(h["model"], h["state"]) for h in rows] for w, rows in homes.items()}


def test_the_gateway_warms_its_homes_and_the_page_shows_them(
    served: tuple[Served, FakeGpuBox, FakeGpuBox],
) -> None:
    gateway, a, b = served
    loaded = {"gpu-a": [("gemma3:12b", "loaded")], "gpu-b": [("qwen3:8b", "loaded")]}
    wait_until(lambda: states(gateway) == loaded, 60, "both homes warmed and seen in /api/ps")
    assert (a.loaded(), b.loaded()) == (["gemma3:12b"], ["qwen3:8b"])
    assert (a.loads, b.loads) == (1, 1)
    assert gateway.metric("interlock_warmups_total", endpoint="local@gpu-a", result="ok") == 1
    with browser() as chromium:
        page: Any = chromium.new_page()
        response = page.goto(f"{gateway.url}/ui")
        assert response is not None
        assert response.status == 200
        placed_a = page.locator("#worker-gpu-a dd.placed").inner_text()
        placed_b = page.locator("#worker-gpu-b dd.placed").inner_text()
        assert "gemma3:12b (9.0 GiB, loaded)" in placed_a
        assert "of 14.4 GiB" in placed_a
        assert "qwen3:8b (6.0 GiB, loaded)" in placed_b
        page.close()
