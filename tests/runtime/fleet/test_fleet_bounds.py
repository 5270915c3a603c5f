"""The references `bench/fleet.py` prints above its table: exact on schedules small enough to work by hand.

They bound every policy the benchmark compares, so a wrong one would misstate what is achievable."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "fleet.py"


@pytest.fixture(scope="module")
def fleet() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_fleet", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def first_work(fleet: ModuleType, model: str, prompt_words: int) -> float:
    speed = {m[0]: m[3] for m in fleet.MODELS}[model]
    return float(prompt_words / fleet.PROMPT_TOKENS_PER_S + 1 / speed)


def load_s(fleet: ModuleType, model: str) -> float:
    return float({m[0]: m[2] for m in fleet.MODELS}[model])


def test_a_lone_request_of_a_preloaded_model_gets_its_floor(fleet: ModuleType) -> None:
    model = fleet.PRELOAD[0]
    jobs = [fleet.Job(at_s=1.0, model=model, prompt_words=300, answer_tokens=20)]
    for first_loads in (False, True):
        (ttft,) = fleet.never_loading(jobs, 1, first_loads=first_loads)
        assert ttft == pytest.approx(first_work(fleet, model, 300))


def test_a_model_not_preloaded_waits_for_its_first_load_and_only_its_first(fleet: ModuleType) -> None:
    model = "phi4:14b"
    assert model not in fleet.PRELOAD
    load = load_s(fleet, model)
    jobs = [
        fleet.Job(at_s=0.0, model=model, prompt_words=300, answer_tokens=20),
        fleet.Job(at_s=load / 2, model=model, prompt_words=300, answer_tokens=20),  # during the load
        fleet.Job(at_s=100.0, model=model, prompt_words=300, answer_tokens=20),  # long after
    ]
    work = first_work(fleet, model, 300)
    assert fleet.never_loading(jobs, 3) == pytest.approx([work, work, work])
    first, during, after = fleet.never_loading(jobs, 3, first_loads=True)
    assert first == pytest.approx(load + work)
    assert during == pytest.approx(load / 2 + work)  # on another box, so no sharing
    assert after == pytest.approx(work)


def test_requests_on_one_gpu_share_it(fleet: ModuleType) -> None:
    """Two equal requests on one box at once: each advances at half speed, so each first token takes
    twice the work; a third, of the same model, waits for one of the PARALLEL slots."""
    model = fleet.PRELOAD[0]
    assert fleet.PARALLEL == 2
    jobs = [fleet.Job(at_s=0.0, model=model, prompt_words=300, answer_tokens=1) for _ in range(3)]
    work = first_work(fleet, model, 300)
    one, two, three = fleet.never_loading(jobs, 1)
    assert one == pytest.approx(2 * work)
    assert two == pytest.approx(2 * work)
    # the first two finish together at 2 x their whole work (their answer is one token: the first)
    assert three == pytest.approx(2 * work + work)
    assert not any(math.isnan(t) for t in (one, two, three))


def test_the_shipped_workloads_are_what_their_names_say(fleet: ModuleType) -> None:
    """The utilisation each workload is documented with (docs/benchmarks.md)."""
    busy = {name: fleet.busy(fleet.workload(11, 300, shape), 3) for name, shape in fleet.WORKLOADS.items()}
    assert busy == pytest.approx({"heavy": 0.632, "moderate": 0.316, "interactive": 0.30}, abs=0.01)


def test_the_clairvoyant_reference_evicts_the_model_needed_furthest(fleet: ModuleType) -> None:
    """One box of 12 GiB holding two 6 GiB models; a third comes: the one not needed again is evicted
    (LRU would evict the one needed next), so the schedule needs one load, not two."""
    from reference import Spec, clairvoyant

    specs = {"a": Spec(6.0, 1.0, 100.0), "b": Spec(6.0, 1.0, 100.0), "c": Spec(6.0, 1.0, 100.0)}
    jobs = [
        fleet.Job(at_s=0.0, model="b", prompt_words=0, answer_tokens=1),  # b used last...
        fleet.Job(at_s=1.0, model="c", prompt_words=0, answer_tokens=1),  # c must load: evict a or b?
        fleet.Job(at_s=5.0, model="b", prompt_words=0, answer_tokens=1),  # b is needed again; a never
    ]
    common = {"vram_gib": 12.0, "parallel": 2, "prompt_tokens_per_s": 1000.0, "answer_cap": 10, "gain": 0.0}
    ref = clairvoyant(jobs, 1, specs, ("a", "b"), **common)
    assert (ref.loads, ref.evictions) == (1, 1)
    assert ref.ttft_s == pytest.approx([0.01, 1.01, 0.01])  # c waits for its load; b is still there
    too_small = clairvoyant(jobs, 1, specs, ("a", "b"), **{**common, "vram_gib": 6.0})
    assert too_small.loads >= 2  # VRAM counts: with room for one model, b must come back
