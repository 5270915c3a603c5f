"""Placement, compiled: the packing rule (``interlock.common.packing``), the footprints and ranks the compiler
gives it, what the plan holds and what `interlock explain` says."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock.common.packing import Want, pack
from interlock.compiler.explain import explain
from interlock.compiler.homes import FOREVER, keep_alive_seconds
from tests.conftest import compile_text

CONFIG = """\
version: 1
routing:
  placement: {{warm: true, keep_alive: 24h}}
models:
  ollama/qwen3:8b: {{size_gib: 6}}
  ollama/gemma3:12b: {{size_gib: 9, kv_bytes_per_token: 131072}}
  ollama/llama3.3:70b: {{size_gib: 20}}
providers:
  ollama:
    kind: ollama
    workers:
      - {{name: box1, url: "http://10.0.0.1:11434", profile: rtx4090}}
      - {{name: box2, url: "http://10.0.0.2:11434", memory_gib: {box2}}}
  llama:
    kind: openai
    workers:
      - {{name: cpp, url: "http://10.0.0.3:8080/v1", memory_gib: 8}}
aliases:
  fast: {{chain: [ollama/qwen3:8b, ollama/gemma3:12b]}}
  big: {{chain: [ollama/llama3.3:70b, ollama/qwen3:8b]}}
  cpp: {{chain: [llama/smollm2]}}
"""


def test_every_model_gets_a_home_before_any_gets_a_second() -> None:
    wants = [Want("a", {"w1": 6, "w2": 6}), Want("b", {"w1": 9, "w2": 9}), Want("c", {"w1": 5, "w2": 5})]
    packing = pack({"w1": 12, "w2": 10}, wants)
    # best fit: a (6) -> w2 (4 left, tighter than w1's 6), b (9) -> w1 (3 left), c (5) fits nowhere now
    assert packing.homes == {"w1": ("b",), "w2": ("a",)}
    assert packing.homeless == ("c",)
    assert packing.used == {"w1": 9, "w2": 6}


def test_a_model_that_still_fits_gets_further_homes_in_rank_order() -> None:
    wants = [Want("a", {"w1": 4, "w2": 4}), Want("b", {"w1": 4, "w2": 4}), Want("c", {"w2": 1})]
    packing = pack({"w1": 10, "w2": 10}, wants)
    assert packing.homes == {"w1": ("a", "b"), "w2": ("a", "b", "c")}
    assert packing.homeless == ()


def test_ties_go_to_the_first_worker_and_the_packing_is_deterministic() -> None:
    wants = [Want("a", {"w2": 3, "w1": 3}), Want("b", {"w2": 8, "w1": 8})]
    first = pack({"w2": 10, "w1": 10}, wants)
    assert first.homes == {"w2": ("b",), "w1": ("a",)}  # a: tie -> w1; b: then only w2 has room
    assert pack({"w2": 10, "w1": 10}, wants) == first


def test_a_worker_that_cannot_hold_a_model_is_never_its_home() -> None:
    packing = pack({"w1": 100, "w2": 1}, [Want("a", {"w2": 2})])
    assert packing.homes == {"w1": (), "w2": ()}
    assert packing.homeless == ("a",)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("forever", FOREVER),
        (" forever ", FOREVER),
        ("30m", 1800),
        ("24h", 86400),
        ("1500ms", 2),
        ("0s", None),
    ],
)
def test_keep_alive_is_forever_or_whole_seconds(text: str, seconds: int | None) -> None:
    assert keep_alive_seconds(text) == seconds


def test_keep_alive_that_is_no_duration_is_refused() -> None:
    assert keep_alive_seconds("soon") is None
    assert keep_alive_seconds("-1") is None


def test_the_plan_holds_budgets_ranks_footprints_and_homes(tmp_path: Path) -> None:
    ctx = compile_text(tmp_path, CONFIG.format(box2=16))
    assert ctx.plan is not None, [str(d) for d in ctx.sink.items]
    placement = ctx.plan.placement
    assert (placement.warm, placement.keep_alive_s) == (True, 86400)
    assert placement.budgets_gib == {"box1": 21.6, "box2": 14.4}  # 90% of 24 (profile) and of 16 (declared)
    ranked = [(m.candidate, m.position, m.aliases) for m in placement.models]
    assert ranked == [("ollama/qwen3:8b", 0, 2), ("ollama/llama3.3:70b", 0, 1), ("ollama/gemma3:12b", 1, 1)]
    gemma = placement.models[2].footprint_gib
    # 9 GiB + KV: box1 gemma3:12b has 1 slot (rtx4090 profile) x 16384 (its context_limits) x 128 KiB = 2 GiB
    assert gemma == {"box1": 11.0, "box2": 9.0}  # box2: no context known, weights only
    # qwen3 -> box2 (the tighter fit), llama3.3 (20) -> box1, gemma3 fits nowhere beside them
    assert placement.homes == {"box1": ["ollama/llama3.3:70b"], "box2": ["ollama/qwen3:8b"]}
    assert placement.homeless == ["ollama/gemma3:12b"]
    assert "cpp" not in placement.budgets_gib  # an OpenAI-compatible server is not placed
    (overcommit,) = [d for d in ctx.sink.items if d.code.startswith("IL21")]
    assert overcommit.code == "IL211"
    assert "`ollama/gemma3:12b` has no home" in overcommit.message


def test_a_first_candidate_without_a_home_is_said_at_its_chain_entry(tmp_path: Path) -> None:
    ctx = compile_text(tmp_path, CONFIG.format(box2=4))
    assert ctx.plan is not None
    assert ctx.plan.placement.homes == {"box1": ["ollama/qwen3:8b", "ollama/gemma3:12b"], "box2": []}
    warnings = {(d.code, d.path) for d in ctx.sink.items if d.code.startswith("IL21")}
    assert warnings == {("IL211", "providers.ollama"), ("IL212", "aliases.big.chain[0]")}


def test_explain_says_where_each_candidate_stays_loaded(tmp_path: Path) -> None:
    ctx = compile_text(tmp_path, CONFIG.format(box2=16))
    lines = [line.strip() for line in explain(ctx, "fast").splitlines() if "placement:" in line]
    assert lines == [
        "placement: not here (6.0 GiB; 20.0 of 21.6 GiB placed on box1); home on box2",
        "placement: home: stays loaded (6.0 GiB; 6.0 of 14.4 GiB placed on box2), warmed at start "
        "(keep_alive 24h)",
        "placement: no home on any worker (11.0 GiB; 20.0 of 21.6 GiB placed on box1): a request loads it",
        "placement: no home on any worker (9.0 GiB; 6.0 of 14.4 GiB placed on box2): a request loads it",
    ]


def test_explain_says_what_placement_cannot_see(tmp_path: Path) -> None:
    text = (
        CONFIG.format(box2=16)
        .replace("memory_gib: 16}", "}")
        .replace("  ollama/qwen3:8b: {size_gib: 6}\n", "")
    )
    ctx = compile_text(tmp_path, text)
    lines = [line.strip() for line in explain(ctx, "fast").splitlines() if "placement:" in line]
    assert lines[:2] == [
        "placement: size not declared: placed at runtime once the worker reports it (/api/tags, /api/ps)",
        "placement: worker memory unknown (set `memory_gib` or a profile with `vram_gib`)",
    ]
    assert {d.code for d in ctx.sink.items} >= {"IL214", "IL215"}
