"""The guard chain compiled per candidate at plan load: only the guards that can apply to it, in order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from interlock.commands.gateway import build_gateway
from interlock.runtime.base.errors import ServerError
from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics, StateView
from interlock.runtime.guards import Admission, Guard, compiled
from interlock.runtime.guards.capability import CapabilityGuard
from interlock.runtime.guards.circuit import HealthGuard
from interlock.runtime.guards.context_fit import ContextGuard
from interlock.runtime.guards.ollama_options import OllamaOptionsGuard
from interlock.runtime.guards.slots import SlotGuard
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.loaded.tables import Check
from interlock.runtime.request.resolve import resolve
from interlock.runtime.request.router import Router
from interlock.runtime.state.memory import MemorySlots
from tests.runtime.conftest import BASIC, build
from tests.runtime.scripted import ScriptedAdapter

PREFLIGHT_AND_HEALTH = [CapabilityGuard, ContextGuard, HealthGuard]
EVERY_GUARD = [CapabilityGuard, ContextGuard, HealthGuard, SlotGuard, OllamaOptionsGuard]
WORKERS = """\
  servers:
    kind: openai
    workers:
      - {name: gpu1, url: "http://127.0.0.1:9/v1", max_concurrent: 2}
"""


def kinds(chain: tuple[Guard, ...]) -> list[type[Guard]]:
    return [type(guard) for guard in chain]


def chains(plan: RuntimePlan, ids: list[str]) -> dict[str, list[type[Guard]]]:
    gateway = build_gateway(plan, probes=False)
    router = gateway.parts.services.router
    return {cid: kinds(router.chain(plan.candidates[cid])) for cid in ids}


def test_a_cloud_candidate_holds_no_ollama_or_fleet_guard(
    plan_data: Callable[[str], dict[str, Any]],
) -> None:
    text = BASIC.replace("  free:\n", WORKERS + "  free:\n") + (
        "  t/servers: {description: workers of an OpenAI-compatible kind, chain: [servers/s1]}\n"
    )
    plan = build(plan_data(text))
    assert chains(plan, ["cloud/c1", "free/f1", "local/m1", "servers/s1"]) == {
        "cloud/c1": PREFLIGHT_AND_HEALTH,  # a base_url: no worker to choose, no slot, no Ollama options
        "free/f1": PREFLIGHT_AND_HEALTH,
        "local/m1": EVERY_GUARD,
        "servers/s1": [*PREFLIGHT_AND_HEALTH, SlotGuard],  # workers, not Ollama
    }
    direct = plan.direct_candidate(plan.providers["cloud"], "raw-model")  # a raw provider/model too
    assert direct.checks == plan.candidates["cloud/c1"].checks


def test_preflight_off_leaves_its_guards_out(plan_data: Callable[[str], dict[str, Any]]) -> None:
    plan = build(plan_data(BASIC + "preflight: {mode: off}\n"))
    assert chains(plan, ["cloud/c1", "local/m1"]) == {
        "cloud/c1": [HealthGuard],
        "local/m1": [HealthGuard, SlotGuard, OllamaOptionsGuard],
    }


def test_a_reload_rebuilds_the_chains(plan_data: Callable[[str], dict[str, Any]]) -> None:
    """The same candidate id, moved from a cloud base_url to Ollama workers: the new plan's candidate
    goes through the slot and Ollama options guards; a request still on the old plan keeps its chain."""
    old = build(plan_data(BASIC))
    moved = BASIC.replace(
        "  cloud:\n    kind: openai\n    base_url: http://127.0.0.1:9/v1/\n    api_key_env: CLOUD_KEY\n",
        "  cloud:\n    kind: ollama\n    workers:\n"
        "      - {name: box2, url: 'http://127.0.0.1:10/', max_concurrent: 1}\n",
    )
    assert moved != BASIC
    new = build(plan_data(moved))
    gateway = build_gateway(old, source=lambda: new, probes=False)
    router = gateway.parts.services.router
    assert kinds(router.chain(gateway.plan.candidates["cloud/c1"])) == PREFLIGHT_AND_HEALTH
    assert asyncio.run(gateway.reload())
    assert gateway.plan is new
    assert kinds(router.chain(gateway.plan.candidates["cloud/c1"])) == EVERY_GUARD
    assert kinds(router.chain(old.candidates["cloud/c1"])) == PREFLIGHT_AND_HEALTH


class Seen(Guard):
    """Records the candidates it was asked about; never skips."""

    def __init__(self, check: Check) -> None:
        self.check = check  # type: ignore[misc]  # per instance here, to test each check
        self.asked: list[str] = []

    async def admit(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        self.asked.append(admission.candidate.id)
        return None


def test_the_walk_runs_only_each_candidates_chain(basic_plan: RuntimePlan) -> None:
    """local/m1 (Ollama) fails; cloud/c1 answers: the Ollama-only guard saw only local/m1, the
    workers-only guard too, the guard for every candidate both, in the chain's order."""
    health = HealthBook(basic_plan.health)
    slots = MemorySlots()
    metrics = Metrics(StateView(lambda: basic_plan, health, slots))
    every, workers, ollama = Seen(Check.EVERY), Seen(Check.WORKERS), Seen(Check.OLLAMA)
    adapter = ScriptedAdapter({"m1": ServerError("bad gateway", status=502), "c1": {"choices": []}})
    router = Router(health, (every, workers, ollama), {"openai": adapter, "ollama": adapter}, metrics)
    body = {"model": "t/chat", "messages": [{"role": "user", "content": "hi"}]}
    answered = asyncio.run(router.chat(resolve(basic_plan, "t/chat"), body))
    assert answered.candidate.id == "cloud/c1"
    assert every.asked == ["local/m1", "cloud/c1"]
    assert workers.asked == ollama.asked == ["local/m1"]


def test_compiled_keeps_the_order_and_picks_by_check() -> None:
    every, workers, ollama = Seen(Check.EVERY), Seen(Check.WORKERS), Seen(Check.OLLAMA)
    table = compiled((workers, every, ollama))
    assert table[Check.EVERY] == (every,)
    assert table[Check.EVERY | Check.OLLAMA] == (every, ollama)
    assert table[Check.EVERY | Check.WORKERS | Check.OLLAMA] == (workers, every, ollama)
    assert table[Check.PREFLIGHT] == ()
    assert len(table) == 1 << len(Check)
