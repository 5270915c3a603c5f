"""Prefix affinity on OpenAI-compatible servers (issue 32, item 1): a prompt's prefill valued at the
server's learned prompt speed, each server's cache as many prompts as its slots (a slot's cache is
replaced by the next prompt it serves), what an arrival evicts, sticky sessions and prefix affinity
as one rule, and `routing.prefix` compiled into the plan."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.books.estimate import needs_of
from interlock.runtime.fleet.live_facts import LiveFacts
from interlock.runtime.fleet.prefix import CHARS_PER_TOKEN, PrefixIndex, prompt_prefix
from interlock.runtime.fleet.scoring import Scorer, backend_occupancy
from interlock.runtime.fleet.signals.base import ServerLoad
from interlock.runtime.fleet.speeds import SpeedBook
from interlock.runtime.guards import Admission
from interlock.runtime.guards.preflight import DEFAULT_SETTINGS, Preflight
from interlock.runtime.guards.slots import SlotGuard
from interlock.runtime.loaded.plan import RuntimePlan, load_plan
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.telemetry.collector import TelemetryBook, targets
from tests.runtime.conftest import compile_text

CONFIG = """\
version: 1
providers:
  llama:
    kind: openai
    probe: false
    workers:
      - {{name: a, url: "http://127.0.0.1:9/v1", server: llama.cpp, max_concurrent: 2}}
      - {{name: b, url: "http://127.0.0.2:9/v1", server: llama.cpp, max_concurrent: 2}}
      - {{name: c, url: "http://127.0.0.3:9/v1", server: llama.cpp, max_concurrent: 2}}
aliases:
  t/chat: {{chain: [llama/smollm2]}}
{routing}"""


def session(n: int, *turns: str) -> dict[str, Any]:
    """Session ``n``'s prompt: its own system prompt (about 1,500 tokens), then its turns."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": f"You are agent {n}. " * 500}]
    for i, text in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return {"model": "t/chat", "messages": messages}


class Rig:
    def __init__(self, tmp: Path, routing: str = "") -> None:
        self.plan: RuntimePlan = load_plan(compile_text(tmp, CONFIG.format(routing=routing)), {})
        self.facts = LiveFacts()
        telemetry = TelemetryBook()
        telemetry.configure(targets(self.plan))
        self.speeds = SpeedBook()
        self.slots = MemorySlots()
        self.slots.configure(self.plan.workers)
        occupancy = backend_occupancy(self.slots, lambda: self.plan.workers)
        self.now = 100.0
        self.scorer = Scorer(self.facts, telemetry, self.speeds, occupancy, clock=lambda: self.now)
        self.candidate = self.plan.candidates["llama/smollm2"]
        for worker in "abc":
            self.facts.put_load(f"llama@{worker}", ServerLoad(running=0, waiting=0, slots=2, at=1.0))

    def choose(self, body: dict[str, Any]) -> str | None:
        routes = self.scorer.order(
            self.candidate, self.candidate.routes, self.plan.routing, prefix=prompt_prefix(body)
        )
        return routes[0].worker

    def send(self, body: dict[str, Any]) -> str:
        """Choose a worker for ``body`` and note it sent there; the worker."""
        worker = self.choose(body)
        route = next(r for r in self.candidate.routes if r.worker == worker)
        self.scorer.sent(self.candidate, route, prompt_prefix(body))
        assert worker is not None
        return worker


def test_a_slots_cache_is_replaced_by_the_next_prompt_it_serves() -> None:
    index = PrefixIndex()
    first, second, third = (prompt_prefix(session(n, "hello")) for n in range(3))
    assert first is not None
    assert second is not None
    assert third is not None
    index.served("w", "m", first, capacity=2)
    index.served("w", "m", second, capacity=2)
    later = prompt_prefix(session(0, "hello", "Hi.", "and now?"))
    assert later is not None
    assert index.look("w", "m", later, 2, 0.0, 60.0) == (later.ends[1], 0)  # extends its own: no victim
    index.served("w", "m", later, capacity=2)  # session 0's slot, not a new one
    assert index.report()["prompts"] == 2
    assert index.look("w", "m", third, 2, 0.0, 60.0) == (0, second.ends[-1])  # full: session 1 goes
    assert index.look("w", "m", third, 2, 120.0, 60.0) == (0, 0)  # unless it is idle past idle_ttl
    index.served("w", "m", third, capacity=2)
    assert index.matched("w", "m", second) == 0
    assert index.matched("w", "m", later) == later.ends[-1]
    assert index.evicted == 1


def test_a_later_turn_stays_where_its_prefix_is_at_the_learned_prompt_speed(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    assert rig.send(session(0, "list the files")) == "a"
    rig.speeds.record("llama@a", "smollm2", 20, 10**9, service_ns=20 * 10**9)  # 20 s a request
    rig.facts.put_load("llama@a", ServerLoad(running=3, waiting=0, slots=3, at=2.0))  # all 3 slots busy
    turn2 = session(0, "list the files", "src/ tests/", "open src/")
    # at the 1,000 tokens/s default a hit saves about 2 s: less than the 6.7 s wait on a (20 s / 3 slots)
    assert rig.choose(turn2) == "b"
    rig.scorer.prefixes.prefill.record("llama@a", "smollm2", 93.0)  # what llama-server's timings say
    assert rig.choose(turn2) == "a"  # the miss elsewhere (about 20 s of prefill) costs more
    scored = rig.scorer.last["a"]
    prefix = prompt_prefix(turn2)
    assert prefix is not None
    assert scored.prefix_s == pytest.approx(prefix.ends[1] / CHARS_PER_TOKEN / 93.0)
    assert rig.scorer.last["b"].miss_s == pytest.approx(prefix.ends[-1] / CHARS_PER_TOKEN / 93.0)
    assert scored.report()["cache_prompts"] == 3  # the server's own slot count (/slots), not the limit 2


def test_a_new_session_goes_where_it_evicts_no_one(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.scorer.prefixes.prefill.record("llama@a", "smollm2", 93.0)
    for n in range(2):  # a's two slots hold sessions 0 and 1 (sent there by someone's choice)
        route = rig.candidate.routes[0]
        rig.scorer.last.pop("a", None)
        rig.choose(session(n, "hi"))
        rig.scorer.sent(rig.candidate, route, prompt_prefix(session(n, "hi")))
    rig.facts.put_load("llama@b", ServerLoad(running=0, waiting=0, slots=2, at=2.0))
    assert rig.choose(session(2, "hi")) == "b"  # a would evict session 0's cache
    assert rig.scorer.last["a"].victim_s > 0 == rig.scorer.last["b"].victim_s


def test_without_an_eviction_weight_plan_order_decides(tmp_path: Path) -> None:
    rig = Rig(tmp_path, "routing:\n  prefix: {evict: 0}\n")
    for n in range(2):
        rig.choose(session(n, "hi"))
        rig.scorer.sent(rig.candidate, rig.candidate.routes[0], prompt_prefix(session(n, "hi")))
    assert rig.choose(session(2, "hi")) == "a"


def test_prefix_off_scores_on_load_alone_and_the_plan_says_so(tmp_path: Path) -> None:
    rig = Rig(tmp_path, "routing:\n  prefix: off\n")
    assert rig.plan.routing.prefix is None
    assert rig.plan.source.routing.prefix.enabled is False
    rig.send(session(0, "list the files"))
    rig.facts.put_load("llama@a", ServerLoad(running=1, waiting=0, slots=2, at=2.0))
    assert rig.choose(session(0, "list the files", "src/", "open src/")) == "b"  # fewer running
    on = Rig(tmp_path, "routing:\n  prefix: {miss: 2, spare_prompts: 4, idle_ttl: 5m}\n")
    assert on.plan.routing.prefix is not None
    assert (on.plan.routing.prefix.miss, on.plan.routing.prefix.spare_prompts) == (2.0, 4)
    assert on.plan.routing.prefix.idle_s == 300.0


def test_a_sticky_pin_decides_only_where_the_prompt_has_no_blocks(tmp_path: Path) -> None:
    rig = Rig(tmp_path, "routing:\n  sticky: {enabled: true}\n")
    guard = SlotGuard(rig.slots, rig.scorer, lambda: rig.plan.routing)

    async def admit(body: dict[str, Any], session_id: bytes) -> str | None:
        preflight = Preflight(needs_of(body, "chat", DEFAULT_SETTINGS), "off")
        preflight.session = session_id
        admission = Admission(rig.candidate, rig.candidate.routes, preflight)
        assert await guard.admit(admission, body) is None
        assert admission.route is not None
        assert admission.lease is not None
        await admission.lease.release()
        return admission.route.worker

    rig.scorer.prefixes.prefill.record("llama@a", "smollm2", 93.0)
    body = session(0, "list the files")
    first = asyncio.run(admit(body, b"s-1"))
    assert first == "a"  # no pin yet for s-1; plan order among idle, empty caches
    rig.facts.put_load("llama@a", ServerLoad(running=1, waiting=0, slots=2, at=2.0))
    assert asyncio.run(admit(session(0, "list the files", "src/", "open src/"), b"s-1")) == "a"
    short = {"model": "t/chat", "messages": [{"role": "user", "content": "hi"}]}  # no blocks: the pin
    assert asyncio.run(admit(short, b"s-1")) == "a"
