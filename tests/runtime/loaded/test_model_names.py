"""One name rule: Ollama runs `m` as `m:latest`, so ACLs, prices, slot limits and raw requests treat the
two spellings as one model, whichever of them the config or the caller writes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from interlock.commands.gateway import build_gateway
from interlock.common.pattern_text import parse_match, parse_pattern
from interlock.common.patterns import matches, order, slot_limit
from interlock.runtime.base.errors import ModelNotAllowed
from interlock.runtime.loaded.plan import load_plan
from interlock.runtime.request.resolve import resolve
from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.faults import Fault
from tests.runtime.conftest import build, compile_text

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


@pytest.mark.parametrize("pattern", ["local/llama3.2:*", "local/llama3.2:lat*"])
def test_a_tag_prefix_covers_the_untagged_spelling_too(tmp_path: Path, pattern: str) -> None:
    """`m:*` is every tag of `m`, the implicit `:latest` too: a key denied `local/llama3.2:*` was let
    through to `local/llama3.2` (the same model on the worker), and a slot limit or a price written so
    missed it."""
    row = parse_match(pattern)
    assert row is not None
    assert matches(row, "local/llama3.2")
    assert matches(row, "local/llama3.2:latest")
    assert not matches(row, "local/llama3")
    if pattern.endswith(":*"):
        assert matches(row, "local/llama3.2:1b")
    slots = [r for r in (parse_pattern(pattern.removeprefix("local/"), 1), parse_pattern("*", 3)) if r]
    assert slot_limit(order(slots), 4, "llama3.2") == 1
    plan = load_plan(compile_text(tmp_path, _config(pattern, pattern)), {"ALICE_KEY": "alice-secret-0c3e9a"})
    assert plan.keys is not None
    alice = plan.keys.authenticate([(b"authorization", b"Bearer alice-secret-0c3e9a")])
    for name in ("local/llama3.2", "local/llama3.2:latest"):
        assert not alice.may_call(name)
        with pytest.raises(ModelNotAllowed):
            alice.check(resolve(plan, name, alice).label)
    assert [c.id for c in alice.targets["chat"].candidates] == ["local/qwen3:8b"]
    assert "local/llama3.2" in plan.source.access.prices


SLOTS = """\
version: 1
server: {{alias_namespace: t/}}
providers:
  local:
    kind: ollama
    probe: false
    timeouts: {{connect: 1s, first_byte: 30s, total: 30s}}
    workers:
      - name: box1
        url: "{url}"
        max_concurrent: 4
        model_concurrency: {{"llama3.2": 1}}
        queue: {{max_waiting: 0, max_wait: 1s}}
aliases:
  t/plain: {{chain: [local/llama3.2]}}
  t/tagged: {{chain: ["local/llama3.2:latest"]}}
"""


def test_both_spellings_share_one_models_slots(plan_data: Callable[[str], dict[str, Any]]) -> None:
    """`local/llama3.2` and `local/llama3.2:latest` in two chains are one model on the worker: its one
    slot is one count (before: one each, so two ran at once on a model limited to one)."""
    gate = threading.Event()
    hi = [{"role": "user", "content": "hi"}]
    with FakeOllama(name="box1", models=[ModelSpec("llama3.2", ("completion",))]) as box:
        box.set_fault(Fault.hold(gate), model="llama3.2", times=1)
        gateway = build_gateway(build(plan_data(SLOTS.format(url=box.url))), probes=False)

        async def scenario() -> tuple[int, int, dict[str, Any]]:
            await gateway.startup()
            try:
                transport = httpx.ASGITransport(app=gateway)
                async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30) as http:
                    body = {"messages": hi, "stream": False}
                    held = asyncio.ensure_future(http.post("/api/chat", json={**body, "model": "t/plain"}))
                    while box.in_flight == 0:  # noqa: ASYNC110 (waiting on the fake's state)
                        await asyncio.sleep(0.01)
                    other = await http.post("/api/chat", json={**body, "model": "t/tagged"})
                    health = (await http.get("/v1/health")).json()
                    gate.set()
                    return (await held).status_code, other.status_code, health
            finally:
                gate.set()
                await gateway.shutdown()

        plain, tagged, health = asyncio.run(scenario())
    assert (plain, tagged) == (200, 429)
    assert health["workers"]["box1"]["in_use_by_model"] == {"llama3.2": 1}  # the held one, once
