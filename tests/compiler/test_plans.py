"""Golden plans: the shipped example and one small configuration per built-in hardware preset."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from syrupy.assertion import SnapshotAssertion

from interlock.commands.build import plan_text
from interlock.common.resources import builtin_profiles
from interlock.compiler import CompileOptions, compile_config
from interlock.schema.canonical import content_hash
from interlock.schema.plan import RoutingPlan
from tests.conftest import FIXTURES, ROOT, compile_text

PLAN_SCHEMA = json.loads((ROOT / "schema" / "plan.schema.json").read_text())
CONFIGS = [
    "config.rtx4090.yaml",
    *sorted(p.relative_to(ROOT).as_posix() for p in FIXTURES.glob("plans/*.yaml")),
]


def compile_plan(path: str) -> str:
    ctx = compile_config(path, CompileOptions(environ={}))
    assert [str(d.span) + " " + d.code for d in ctx.sink.items] == []
    assert ctx.plan is not None
    return plan_text(ctx.plan)


@pytest.mark.usefixtures("at_root")
@pytest.mark.parametrize("path", CONFIGS)
def test_plan_snapshot(path: str, snapshot: SnapshotAssertion) -> None:
    text = compile_plan(path)
    data = json.loads(text)
    jsonschema.validate(data, PLAN_SCHEMA)
    assert RoutingPlan.model_validate(data).content_hash == content_hash(data)
    assert text.endswith("}\n")
    assert text == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert text == snapshot


def test_every_builtin_preset_has_a_plan_fixture() -> None:
    assert sorted(builtin_profiles()) == sorted(
        p.stem.removeprefix("preset-") for p in FIXTURES.glob("plans/preset-*.yaml")
    )


@pytest.mark.usefixtures("at_root")
def test_example_plan_holds_what_the_runtime_needs() -> None:
    plan = json.loads(compile_plan("config.rtx4090.yaml"))
    assert plan["format_version"] == 1
    assert plan["aliases"]["mana/reasoning"]["candidates"] == [
        "openrouter/anthropic/claude-3.5-sonnet",
        "groq/llama-3.3-70b-versatile",
    ]
    groq = plan["providers"]["groq"]
    assert groq["api_key_env"] == "GROQ_API_KEY"
    assert groq["probe"] is True
    assert plan["providers"]["openrouter"]["probe"] is False
    assert plan["providers"]["ollama"]["timeouts"] == {
        "connect_ms": 2000,
        "first_byte_ms": 120000,
        "idle_ms": 120000,  # unset: the kind's own
        "total_ms": 600000,
    }
    worker = plan["workers"]["rtx4090"]
    # Every ollama model the plan references has a slot count; the table covers the rest.
    assert worker["slots"] == {"gemma3:12b": 1, "llava:7b": 1, "qwen2.5:7b": 2}
    assert [row["pattern"] for row in worker["patterns"]] == ["qwen2.5:7b", "qwen3:8b", "gemma4:*", "*"]
    assert plan["candidates"]["ollama/llava:7b"]["capabilities"] == ["completion", "vision"]


def test_slot_lookup_order_exact_then_longest_prefix_then_any_then_max(tmp_path: Path) -> None:
    ctx = compile_text(
        tmp_path,
        """version: 1
providers:
  local:
    kind: ollama
    workers:
      - name: box
        url: http://127.0.0.1:11434
        max_concurrent: 4
        model_concurrency: {"q*": 2, "qwen*": 3, "qwen3:8b": 4}
      - name: star
        url: http://127.0.0.2:11434
        max_concurrent: 4
        model_concurrency: {"*": 1, "qwen3:8b": 3}
aliases:
  a: {chain: [local/qwen3:8b, local/qwen2:7b, local/qa, local/llama3]}
""",
    )
    assert ctx.plan is not None
    assert ctx.plan.workers["box"].slots == {"llama3": 4, "qa": 2, "qwen2:7b": 3, "qwen3:8b": 4}
    assert ctx.plan.workers["star"].slots == {"llama3": 1, "qa": 1, "qwen2:7b": 1, "qwen3:8b": 3}
    assert [(r.match, r.prefix) for r in ctx.plan.workers["box"].patterns] == [
        ("exact", "qwen3:8b"),
        ("prefix", "qwen"),
        ("prefix", "q"),
    ]


def test_worker_keys_override_profile_values(tmp_path: Path) -> None:
    ctx = compile_text(
        tmp_path,
        """version: 1
providers:
  local:
    kind: ollama
    workers:
      - {name: plain, url: "http://127.0.0.1:11434", profile: mac-studio-256g}
      - name: tuned
        url: http://127.0.0.2:11434
        profile: mac-studio-256g
        max_concurrent: 3
        model_concurrency: {"qwen3:8b": 3}
        queue: {max_waiting: 5}
aliases:
  a: {chain: [local/qwen3:8b, local/gemma4:27b]}
""",
    )
    assert ctx.plan is not None
    plain, tuned = ctx.plan.workers["plain"], ctx.plan.workers["tuned"]
    assert (plain.max_concurrent, plain.slots) == (4, {"gemma4:27b": 2, "qwen3:8b": 4})
    assert plain.default_context_tokens == 32768
    assert plain.hardware is not None
    # A table the worker sets replaces the profile's whole table: gemma4 falls back to max_concurrent.
    assert (tuned.max_concurrent, tuned.slots) == (3, {"gemma4:27b": 3, "qwen3:8b": 3})
    # `queue` merges key by key: max_wait still comes from the profile (60s), not the default (30s).
    assert (tuned.queue.max_waiting, tuned.queue.max_wait_ms) == (5, 60_000)
    assert tuned.default_context_tokens == 32768
    assert tuned.profile == "mac-studio-256g"


def test_a_provider_never_inherits_another_providers_credential(tmp_path: Path) -> None:
    ctx = compile_text(
        tmp_path,
        """version: 1
providers:
  groq: {kind: openai, base_url: "https://api.groq.com/openai/v1", api_key_env: GROQ_API_KEY}
  vllm: {kind: openai, base_url: "http://10.0.0.5:8000/v1"}
aliases:
  a: {chain: [groq/llama-3.1-8b-instant, vllm/qwen3-8b]}
""",
        environ={"GROQ_API_KEY": "x"},
    )
    assert ctx.plan is not None
    assert ctx.plan.providers["groq"].api_key_env == "GROQ_API_KEY"
    assert ctx.plan.providers["vllm"].api_key_env is None
    assert [d.code for d in ctx.sink.items] == ["IL115", "IL108"]


@pytest.mark.parametrize(
    ("auth", "operator", "warned"),
    [("required", False, True), ("optional", False, True), ("required", True, False), ("off", False, False)],
)
def test_il820_only_when_keys_are_read_and_none_is_an_operator(
    tmp_path: Path, auth: str, operator: bool, warned: bool
) -> None:
    ctx = compile_text(
        tmp_path,
        f"version: 1\nserver: {{auth: {auth}}}\n"
        "providers: {local: {kind: ollama, workers: [{name: a, url: 'http://127.0.0.1:1'}]}}\n"
        "aliases: {chat: {chain: [local/m]}}\ntenants: {a: {}, b: {}}\n"
        f"keys:\n  one: {{tenant: a, key_env: ONE_KEY, operator: {str(operator).lower()}}}\n"
        "  two: {tenant: b, key_env: TWO_KEY}\n",
    )
    assert ctx.plan is not None
    assert ("IL820" in [d.code for d in ctx.sink.items]) == warned
    assert [k.operator for k in ctx.plan.access.keys.values()] == [operator, False]
