"""One name rule: Ollama runs `m` as `m:latest`, so ACLs, prices, slot limits and raw requests treat the
two spellings as one model, whichever of them the config or the caller writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock.patterns import matches, order, parse_match, parse_pattern, slot_limit
from interlock.runtime.errors import ModelNotAllowed
from interlock.runtime.plan import load_plan
from interlock.runtime.resolve import resolve
from tests.runtime.conftest import compile_text

SPELLINGS = [("llama3.2", "llama3.2:latest"), ("llama3.2:latest", "llama3.2")]


@pytest.mark.parametrize(("written", "asked"), SPELLINGS)
def test_an_exact_pattern_covers_the_other_spelling(written: str, asked: str) -> None:
    row = parse_match(f"local/{written}")
    assert row is not None
    assert matches(row, f"local/{asked}")
    assert not matches(row, "local/llama3.2:1b")  # another tag is another model
    assert not matches(row, "local/llama3")


@pytest.mark.parametrize(("written", "asked"), SPELLINGS)
def test_a_slot_limit_covers_the_other_spelling(written: str, asked: str) -> None:
    rows = [row for row in (parse_pattern(written, 1), parse_pattern("*", 3)) if row is not None]
    assert slot_limit(order(rows), 4, asked) == 1


def _config(denied: str, priced: str) -> str:
    return f"""\
version: 1
server: {{auth: required, direct_models: allow}}
providers:
  local:
    kind: ollama
    workers: [{{name: box1, url: "http://127.0.0.1:9", max_concurrent: 2}}]
tenants:
  team: {{denied: ["{denied}"], credits: 1000, credits_unit: money}}
keys:
  alice: {{tenant: team, key_env: ALICE_KEY, operator: true}}
pricing:
  models: {{"{priced}": {{input: 1, output: 2}}}}
aliases:
  chat: {{chain: [local/llama3.2, local/qwen3:8b]}}
"""


@pytest.mark.parametrize(("written", "asked"), SPELLINGS)
def test_a_denied_model_is_denied_in_either_spelling(tmp_path: Path, written: str, asked: str) -> None:
    plan = load_plan(
        compile_text(tmp_path, _config(f"local/{written}", "local/*")), {"ALICE_KEY": "alice-secret-0c3e9a"}
    )
    assert plan.keys is not None
    alice = plan.keys.authenticate([(b"authorization", b"Bearer alice-secret-0c3e9a")])
    for name in (f"local/{written}", f"local/{asked}"):
        assert not alice.may_call(name)
        with pytest.raises(ModelNotAllowed):
            alice.check(resolve(plan, name, alice).label)
    assert alice.may_call("local/qwen3:8b")
    assert [c.id for c in alice.targets["chat"].candidates] == ["local/qwen3:8b"]


@pytest.mark.parametrize(("written", "asked"), SPELLINGS)
def test_a_price_covers_the_other_spelling(tmp_path: Path, written: str, asked: str) -> None:
    data = compile_text(tmp_path, _config("local/none", f"local/{written}"))
    assert data["access"]["prices"] == {"local/llama3.2": {"input": 1.0, "output": 2.0}}


def test_a_raw_request_in_the_other_spelling_is_the_listed_candidate(tmp_path: Path) -> None:
    """`local/llama3.2:latest` asked directly takes the plan's `local/llama3.2` (its slots, its facts)."""
    plan = load_plan(
        compile_text(tmp_path, _config("local/none", "local/*")), {"ALICE_KEY": "alice-secret-0c3e9a"}
    )
    listed = plan.candidates["local/llama3.2"]
    assert resolve(plan, "local/llama3.2:latest").candidates == (listed,)
    assert resolve(plan, "local/qwen3:8b").candidates == (plan.candidates["local/qwen3:8b"],)
    assert resolve(plan, "local/qwen3").candidates[0].id == "local/qwen3"  # another model
