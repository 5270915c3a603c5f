"""`bench/fleet.py`'s prefix workload, batching gain and prefix-only policy: exact on small schedules."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "fleet.py"


@pytest.fixture(scope="module")
def fleet() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_fleet_prefix", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_turn_counts_as_sent_before_what_earlier_requests_sent(fleet: ModuleType) -> None:
    shape = replace(fleet.Sessions(), system_prompts=1, turns=(3, 3), rate=0.01)
    jobs = fleet.sessions(5, 6, shape)  # two sessions of three turns, one system prompt
    words = {job.messages: job.prompt_words for job in jobs}
    first, second = jobs[0], next(j for j in jobs if j.messages[1] != jobs[0].messages[1])
    assert first.cached_words == 0  # the very first request: nothing before it
    assert second.cached_words == len(first.messages[0][1].split())  # the shared system prompt
    for job in jobs:
        if len(job.messages) > 2:  # a later turn: its previous turn's whole prompt was sent
            assert job.cached_words == words[job.messages[:-2]]


def test_decoding_together_gains_with_batching(fleet: ModuleType) -> None:
    model = fleet.PRELOAD[0]
    speed = {m[0]: m[3] for m in fleet.MODELS}[model]
    jobs = [fleet.Job(at_s=0.0, model=model, prompt_words=300, answer_tokens=101) for _ in range(3)]
    first = 300 / fleet.PROMPT_TOKENS_PER_S + 1 / speed
    whole = 300 / fleet.PROMPT_TOKENS_PER_S + 101 / speed
    shared = fleet.never_loading(jobs, 1, gain=0.0)
    batched = fleet.never_loading(jobs, 1, gain=1.0)
    assert shared[:2] == pytest.approx([2 * first, 2 * first])  # prompts gain nothing
    assert batched[:2] == pytest.approx([2 * first, 2 * first])
    # the third waits for a slot: the first two decode the rest at full speed each with gain 1
    assert batched[2] == pytest.approx(2 * first + (whole - first) + first)
    assert shared[2] == pytest.approx(2 * first + 2 * (whole - first) + first)


def test_a_perfect_prefix_cache_skips_what_was_sent_before(fleet: ModuleType) -> None:
    model = fleet.PRELOAD[0]
    job = fleet.Job(at_s=0.0, model=model, prompt_words=3000, answer_tokens=10, cached_words=2400)
    speed = {m[0]: m[3] for m in fleet.MODELS}[model]
    (cached,) = fleet.never_loading([job], 1)
    (uncached,) = fleet.never_loading([job], 1, cache=False)
    assert cached == pytest.approx(600 / fleet.PROMPT_TOKENS_PER_S + 1 / speed)
    assert uncached == pytest.approx(3000 / fleet.PROMPT_TOKENS_PER_S + 1 / speed)


def test_prefix_only_follows_the_prefix_and_else_the_fewest_in_flight(fleet: ModuleType) -> None:
    shape = replace(fleet.Sessions(), system_prompts=2, turns=(2, 2), rate=0.01)
    jobs = fleet.sessions(3, 4, shape)
    policy = fleet.prefix_only_policy()
    first = policy([0, 0, 0], jobs[0])
    assert first == 0  # nothing sent yet: the fewest in flight, then order
    follow = next(j for j in jobs if j.messages[:2] == jobs[0].messages[:2] and j is not jobs[0])
    assert policy([5, 0, 0], follow) == first  # its earlier turn went there: busy or not
    other = fleet.Job(0.0, jobs[0].model, 800, 5, (("system", "another " * 800), ("user", "q")))
    assert policy([5, 0, 3], other) == 1
