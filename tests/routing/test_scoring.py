"""Worker scoring from facts, slots, speeds and telemetry: each part, and the order it gives."""

from __future__ import annotations

from pathlib import Path

from interlock.runtime.facts import FactsTable
from interlock.runtime.plan import RuntimePlan, load_plan
from interlock.runtime.scoring import PARTS, Scorer, backend_occupancy
from interlock.runtime.speeds import SpeedBook
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.telemetry.collector import TelemetryBook, targets
from interlock.runtime.telemetry.readings import GpuReading
from tests.runtime.conftest import compile_text

CONFIG = """\
version: 1
providers:
  local:
    kind: ollama
    workers:
      - {name: a, url: "http://127.0.0.1:9/", max_concurrent: 2, telemetry: {url: "http://127.0.0.1:9/t"}}
      - {name: b, url: "http://127.0.0.2:9/", max_concurrent: 2, telemetry: {url: "http://127.0.0.2:9/t"}}
aliases:
  t/chat: {chain: [local/m]}
"""


class Rig:
    def __init__(self, tmp: Path) -> None:
        self.plan: RuntimePlan = load_plan(compile_text(tmp, CONFIG), {})
        self.now = 100.0
        self.facts = FactsTable()
        self.telemetry = TelemetryBook()
        self.telemetry.configure(targets(self.plan))
        self.speeds = SpeedBook()
        self.slots = MemorySlots()
        self.slots.configure(self.plan.workers)
        occupancy = backend_occupancy(self.slots, lambda: self.plan.workers)
        self.scorer = Scorer(self.facts, self.telemetry, self.speeds, occupancy, clock=lambda: self.now)
        self.candidate = self.plan.candidates["local/m"]

    def order(self) -> list[str | None]:
        routes = self.scorer.order(self.candidate, self.candidate.routes, self.plan.routing)
        return [r.worker for r in routes]

    def parts(self, worker: str) -> dict[str, float]:
        return dict(zip(PARTS, self.scorer.last[worker].parts, strict=True))

    def vram(self, worker: str, percent: float) -> None:
        gpu = GpuReading(0, vram_total_bytes=100, vram_used_bytes=int(percent), utilization_percent=0.0)
        self.telemetry.workers[worker].remote_gpu = gpu


def test_ties_keep_plan_order_and_a_loaded_model_wins(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    assert rig.order() == ["a", "b"]
    rig.facts.put_loaded("local@a", {}, 1.0)
    rig.facts.put_loaded("local@b", {"m:latest": 4096}, 1.0)
    assert rig.order() == ["b", "a"]
    assert rig.parts("b")["loaded"] == 100.0
    assert rig.parts("a")["queue"] == 0.0


def test_a_model_sent_since_the_last_ps_counts_as_loaded_but_only_where_ps_is_known(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.scorer.sent(rig.candidate, rig.candidate.routes[1])  # sent to b; no /api/ps read yet: no guess
    assert rig.order() == ["a", "b"]
    rig.facts.put_loaded("local@a", {}, 50.0)
    rig.facts.put_loaded("local@b", {}, 50.0)  # read before the send (at 100): b has it loading
    assert rig.order() == ["b", "a"]
    rig.facts.put_loaded("local@b", {}, 150.0)  # a later /api/ps says it is gone (evicted)
    assert rig.order() == ["a", "b"]


def test_faster_learned_speed_wins(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.speeds.record("local@b", "m:latest", 100, 1_000_000_000)
    assert rig.order() == ["b", "a"]
    assert rig.parts("b")["speed"] == 20.0


def test_a_worker_above_avoid_vram_percent_is_not_asked_to_load(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.vram("a", 95)
    rig.vram("b", 50)
    assert rig.order() == ["b", "a"]
    assert rig.parts("a")["avoid_load"] == -1000.0
    rig.facts.put_loaded("local@a", {"m:latest": 4096}, 1.0)
    rig.facts.put_loaded("local@b", {}, 1.0)
    assert rig.order() == ["a", "b"]  # loaded there already: no load, no penalty
    assert rig.parts("a")["avoid_load"] == 0.0
