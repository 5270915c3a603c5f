"""Worker scoring from facts, slots, speeds and telemetry: each part, and the order it gives."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.fleet.live_facts import LiveFacts
from interlock.runtime.fleet.scoring import DEFAULT_LOAD_S, PARTS, Scorer, backend_occupancy
from interlock.runtime.fleet.speeds import SpeedBook
from interlock.runtime.loaded.plan import RuntimePlan, load_plan
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
        self.facts = LiveFacts()
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


def test_expected_seconds_order_a_queue_against_a_load_elsewhere(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.facts.put_loaded("local@a", {"m:latest": 4096}, 1.0)
    rig.facts.put_loaded("local@b", {}, 1.0)
    rig.speeds.observe(
        "local@a", "m:latest", {"eval_count": 50, "eval_duration": 10**9, "total_duration": 10**9}
    )

    async def fill(n: int) -> list[Any]:
        return [await rig.slots.acquire("a", "m", 2, wait=False) for _ in range(n)]

    leases = asyncio.run(fill(2))  # a's two slots busy: one request waits 1 s (learned) / 2 slots
    assert rig.order() == ["a", "b"]  # 0.5 s of queue beats the default 3 s load
    assert rig.scorer.last["a"].expected_s == 0.5
    assert rig.scorer.last["b"].expected_s == DEFAULT_LOAD_S
    rig.speeds.record_load("local@b", "m:latest", 400_000_000)  # a load on b is learned: 0.4 s
    assert rig.order() == ["b", "a"]
    rig.scorer.sent(rig.candidate, rig.candidate.routes[1])  # b is loading it now: done in 0.4 s
    rig.now += 0.3
    assert rig.order() == ["b", "a"]
    assert rig.scorer.last["b"].expected_s == pytest.approx(0.1)
    assert all(lease is not None for lease in leases)


def test_a_load_that_needs_room_waits_for_busy_models_and_holds_up_what_follows(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    gib = 1024**3
    rig.facts.put_sizes({"m:latest": 10 * gib, "x:latest": 10 * gib, "y:latest": 10 * gib}, loaded=False)
    for worker in ("a", "b"):
        gpu = GpuReading(0, vram_total_bytes=24 * gib, vram_used_bytes=20 * gib, utilization_percent=0.0)
        rig.telemetry.workers[worker].remote_gpu = gpu
    rig.facts.put_loaded("local@a", {"x:latest": None, "y:latest": None}, 1.0)
    rig.facts.put_loaded("local@b", {"x:latest": None, "y:latest": None}, 1.0)
    rig.speeds.record_load("local@a", "m:latest", 10**9)  # 1 s loads everywhere
    rig.speeds.observe(
        "local@a", "x:latest", {"eval_count": 50, "eval_duration": 10**9, "total_duration": 4 * 10**9}
    )

    async def busy() -> Any:
        return await rig.slots.acquire("a", "x", 2, wait=False)

    assert asyncio.run(busy()) is not None  # x runs on a: m can only evict y there, and y is idle
    rig.order()
    assert (rig.scorer.last["a"].room_s, rig.scorer.last["a"].expected_s) == (0.0, 1.0)
    rig.facts.put_sizes({"m:latest": 20 * gib}, loaded=False)  # now m needs both x and y evicted
    assert rig.order() == ["b", "a"]
    assert rig.scorer.last["a"].room_s == 4.0  # x's learned service time: the load waits for it
    assert rig.scorer.last["a"].expected_s == 5.0
    assert rig.scorer.last["b"].expected_s == 1.0
    rig.scorer.sent(rig.candidate, rig.candidate.routes[0])  # sent to a anyway (say, sticky)
    other = rig.plan.direct_candidate(rig.plan.providers["local"], "y")
    rig.scorer.order(other, other.routes, rig.plan.routing)
    assert rig.scorer.last["a"].expected_s == 4.0  # y is loaded on a, but behind m's load in line


def test_a_load_that_would_evict_the_only_copy_of_a_model_counts_its_reload(tmp_path: Path) -> None:
    """Both workers would evict one idle model to load m. The box evicts its least recently used idle
    model; on a that is y, which no other worker holds (its next request must load it again); on b it
    is x, which a still holds. So b, though both loads take as long."""
    rig = Rig(tmp_path)
    gib = 1024**3
    sizes = {"m:latest": 10 * gib, "x:latest": 10 * gib, "y:latest": 10 * gib, "z:latest": 10 * gib}
    rig.facts.put_sizes(sizes, loaded=False)
    for worker in ("a", "b"):
        gpu = GpuReading(0, vram_total_bytes=24 * gib, vram_used_bytes=20 * gib, utilization_percent=0.0)
        rig.telemetry.workers[worker].remote_gpu = gpu
    rig.facts.put_loaded("local@a", {"x:latest": None, "y:latest": None}, 1.0)
    rig.facts.put_loaded("local@b", {"x:latest": None, "z:latest": None}, 1.0)
    rig.speeds.record_load("local@a", "m:latest", 10**9)  # 1 s loads everywhere (learned on a)
    a, b = rig.candidate.routes

    def send(model: str, route: Any) -> None:
        rig.now += 1.0
        rig.scorer.sent(rig.plan.direct_candidate(rig.plan.providers["local"], model), route)

    send("y", a)  # a: x is the least recently used (never sent), and b holds x too
    send("z", b)  # b: x is the least recently used, and a holds x too
    assert rig.order() == ["a", "b"]  # a tie: plan order
    assert (rig.scorer.last["a"].evicts_s, rig.scorer.last["b"].evicts_s) == (0.0, 0.0)
    send("x", a)  # now a would evict y, which only a holds
    assert rig.order() == ["b", "a"]
    assert rig.scorer.last["a"].evicts_s == 1.0  # y's load (the worker's learned load time)
    assert rig.scorer.last["a"].expected_s == rig.scorer.last["b"].expected_s == 1.0
    assert rig.scorer.last["a"].report()["evicts_s"] == 1.0  # shown in /v1/health


def test_which_workers_hold_a_model_follows_each_workers_last_ps() -> None:
    facts = LiveFacts()
    facts.put_loaded("local@a", {"x:latest": None, "y:latest": None}, 1.0)
    facts.put_loaded("local@b", {"x:latest": None}, 1.0)
    assert (facts.holders("x:latest"), facts.holders("y:latest")) == ({"local@a", "local@b"}, {"local@a"})
    facts.put_loaded("local@a", {"y:latest": None}, 2.0)  # a evicted x
    assert facts.holders("x:latest") == {"local@b"}
    facts.put_loaded("local@b", None, 3.0)  # b's /api/ps failed: nothing known there
    assert facts.holders("x:latest") == frozenset()
    assert facts.holders("z:latest") == frozenset()
