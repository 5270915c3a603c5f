"""Prefix affinity: the prompt's chained blocks, the bounded index, the learned prefill, the score."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.books.learned import DEFAULT_PREFILL_TOKENS_PER_S, PrefillBook
from interlock.runtime.fleet.live_facts import LiveFacts
from interlock.runtime.fleet.prefix import CHARS_PER_TOKEN, PrefixIndex, prompt_prefix
from interlock.runtime.fleet.scoring import Scorer, backend_occupancy
from interlock.runtime.fleet.speeds import SpeedBook
from interlock.runtime.loaded.plan import RuntimePlan, load_plan
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.telemetry.collector import TelemetryBook, targets
from tests.runtime.conftest import compile_text

SYSTEM = "You are the support assistant of a hardware shop. " * 40  # about 2 KB, shared by every session
TOOLS = [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]

CONFIG = """\
version: 1
providers:
  local:
    kind: ollama
    workers:
      - {name: a, url: "http://127.0.0.1:9/", max_concurrent: 2, model_concurrency: {"*": 2}}
      - {name: b, url: "http://127.0.0.2:9/", max_concurrent: 2, model_concurrency: {"*": 2}}
      - {name: c, url: "http://127.0.0.3:9/", max_concurrent: 2, model_concurrency: {"*": 2}}
aliases:
  t/chat: {chain: [local/m]}
"""


def chat(*turns: str, system: str = SYSTEM, tools: Any = None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for i, text in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    body: dict[str, Any] = {"model": "t/chat", "messages": messages}
    if tools is not None:
        body["tools"] = tools
    return body


def blocks(body: dict[str, Any]) -> tuple[int, ...]:
    prefix = prompt_prefix(body)
    assert prefix is not None
    return prefix.hashes


def test_blocks_are_chained_so_a_later_turn_shares_exactly_the_earlier_ones() -> None:
    first = blocks(chat("where is my order?"))
    second = blocks(chat("where is my order?", "It left on Monday.", "and the invoice?"))
    assert (len(first), len(second)) == (2, 4)
    assert second[:2] == first  # the system prompt and the first turn
    other = blocks(chat("do you sell GPUs?"))
    assert other[0] == first[0]  # same system prompt
    assert other[1] != first[1]  # another question
    assert blocks(chat("where is my order?", system="Another shop. " * 40))[1] != first[1]  # chained
    with_tools = blocks(chat("where is my order?", tools=TOOLS))
    assert len(with_tools) == 3
    assert with_tools[1] != first[0]  # the tool schemas come first


def test_a_short_prompt_or_one_without_messages_has_no_prefix() -> None:
    assert prompt_prefix({"messages": [{"role": "user", "content": "hi"}]}) is None
    assert prompt_prefix({"input": "x" * 1000}) is None
    assert prompt_prefix({"messages": ["not a message"]}) is None


def test_the_index_finds_the_longest_run_served_per_worker_and_keeps_only_integers() -> None:
    index = PrefixIndex()
    turn1 = chat("where is my order?")
    turn2 = chat("where is my order?", "It left on Monday.", "and the invoice?")
    p1, p2 = prompt_prefix(turn1), prompt_prefix(turn2)
    assert p1 is not None
    assert p2 is not None
    index.served("local@a", "m:latest", p1)
    assert index.matched("local@a", "m:latest", p2) == p1.ends[-1]  # system + first question
    assert index.matched("local@b", "m:latest", p2) == 0  # another worker
    assert index.matched("local@a", "other:latest", p2) == 0  # another model, another cache
    index.served("local@a", "m:latest", p2)
    assert index.matched("local@a", "m:latest", p2) == p2.ends[-1]
    assert (index.sent, index.hits) == (2, 0)  # hits are the scorer's to say (test below)
    assert all(type(key) is int for cache in index._caches.values() for key in cache.held)  # hashes only
    assert SYSTEM not in repr(index.report())


def test_the_index_is_bounded_least_recently_served_first() -> None:
    index = PrefixIndex(max_blocks=4)
    sessions = [prompt_prefix(chat(f"question {i}", system=f"System prompt {i}. " * 30)) for i in range(3)]
    for prefix in sessions:
        assert prefix is not None
        index.served("local@a", "m:latest", prefix)
    assert len(index) == 4
    first, last = sessions[0], sessions[2]
    assert first is not None
    assert last is not None
    assert index.matched("local@a", "m:latest", first) == 0  # dropped
    assert index.matched("local@a", "m:latest", last) == last.ends[-1]


def test_prefill_speed_is_learned_from_ollama_prompt_timings() -> None:
    book = PrefillBook(smoothing=0.5)
    assert book.tokens_per_s("local@a", "m:latest") == DEFAULT_PREFILL_TOKENS_PER_S
    book.observe("local@a", "m:latest", {"prompt_eval_count": 4000, "prompt_eval_duration": 10**9})
    assert book.tokens_per_s("local@a", "m:latest") == 4000.0
    assert book.tokens_per_s("local@b", "m:latest") == 4000.0  # the model's on another worker
    book.observe("local@a", "m:latest", {"prompt_eval_count": 2000, "prompt_eval_duration": 10**9})
    assert book.tokens_per_s("local@a", "m:latest") == 3000.0
    for useless in ({"prompt_eval_count": 5, "prompt_eval_duration": 10**6}, {"prompt_eval_count": True}, {}):
        book.observe("local@a", "m:latest", useless)
    assert book.tokens_per_s("local@a", "m:latest") == 3000.0


class Rig:
    def __init__(self, tmp: Path) -> None:
        self.plan: RuntimePlan = load_plan(compile_text(tmp, CONFIG), {})
        self.facts = LiveFacts()
        telemetry = TelemetryBook()
        telemetry.configure(targets(self.plan))
        self.speeds = SpeedBook()
        self.slots = MemorySlots()
        self.slots.configure(self.plan.workers)
        occupancy = backend_occupancy(self.slots, lambda: self.plan.workers)
        self.scorer = Scorer(self.facts, telemetry, self.speeds, occupancy, clock=lambda: 100.0)
        self.candidate = self.plan.candidates["local/m"]
        for worker in "abc":
            self.facts.put_loaded(f"local@{worker}", {"m:latest": 4096}, 1.0)

    def choose(self, body: dict[str, Any]) -> str | None:
        """The best worker for ``body`` (not sent there)."""
        prefix = prompt_prefix(body)
        routes = self.scorer.order(self.candidate, self.candidate.routes, self.plan.routing, prefix=prefix)
        return routes[0].worker

    def route(self, worker: str) -> Any:
        return next(r for r in self.candidate.routes if r.worker == worker)


def test_a_conversation_returns_to_the_worker_holding_its_prefix(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    prefix = prompt_prefix(chat("where is my order?"))
    assert prefix is not None
    rig.scorer.sent(rig.candidate, rig.route("c"), prefix)  # turn 1 went to c
    turn2 = chat("where is my order?", "It left on Monday.", "and the invoice?")
    assert rig.choose(turn2) == "c"  # all three idle with the model loaded: c saves the prefill
    saved = rig.scorer.last["c"].prefix_s
    assert saved == pytest.approx(prefix.ends[-1] / CHARS_PER_TOKEN / DEFAULT_PREFILL_TOKENS_PER_S)
    assert rig.scorer.last["a"].prefix_s == 0.0
    assert rig.scorer.last["c"].report()["prefix_s"] == round(saved, 3)
    rig.scorer.sent(rig.candidate, rig.route("c"), prompt_prefix(turn2))
    assert (rig.scorer.prefixes.sent, rig.scorer.prefixes.hits) == (2, 1)


def test_a_hit_is_weighed_against_the_queue_there(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    prefix = prompt_prefix(chat("where is my order?"))
    assert prefix is not None
    rig.scorer.sent(rig.candidate, rig.route("c"), prefix)
    rig.speeds.record("local@c", "m:latest", 100, 10**9, service_ns=2 * 10**9)  # 2 s a request on c

    async def fill() -> list[Any]:
        return [await rig.slots.acquire("c", "m", 2, wait=False) for _ in range(2)]

    leases = asyncio.run(fill())  # c is full: a request there waits 1 s (2 s / 2 slots)
    turn2 = chat("where is my order?", "It left on Monday.", "and the invoice?")
    saved = prefix.ends[-1] / CHARS_PER_TOKEN / DEFAULT_PREFILL_TOKENS_PER_S  # about 0.5 s
    assert saved < 1.0
    assert rig.choose(turn2) == "a"  # the queue costs more than the prefill saved
    rig.scorer.prefixes.prefill.record("local@c", "m:latest", 100.0)  # c turns out slow at prompts
    assert rig.choose(turn2) == "c"
    assert rig.scorer.last["c"].prefix_s > 1.0
    assert all(lease is not None for lease in leases)


def test_no_hit_counts_where_the_model_is_no_longer_loaded(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    prefix = prompt_prefix(chat("where is my order?"))
    assert prefix is not None
    rig.scorer.sent(rig.candidate, rig.route("c"), prefix)
    rig.facts.put_loaded("local@c", {}, 200.0)  # evicted since (a later /api/ps): its KV cache is gone
    rig.facts.put_loaded("local@a", {"m:latest": 4096}, 200.0)
    assert rig.choose(chat("where is my order?", "It left on Monday.", "and the invoice?")) == "a"
    assert rig.scorer.last["c"].prefix_s == 0.0
