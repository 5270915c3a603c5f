"""The fleet is a row (``features.FLEET``, ``fleet/plug.py``): a plan without workers gets no fleet, and the
reload that brings the first workers plugs it in, its guards in the chain, while the gateway runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from interlock.commands.gateway import build_gateway
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.testing.fake_openai import FakeOpenAI
from tests.runtime.conftest import build
from tests.runtime.fleet.test_openai_workers import CONFIG, HI

CLOUD = """\
version: 1
server: {{default_alias: t/chat, alias_namespace: t/}}
providers:
  cloud:
    kind: openai
    probe: false
    base_url: "{url}"
    api_key_env: CLOUD_KEY
aliases:
  t/chat: {{description: the cloud, chain: [cloud/small]}}
"""


def _chain(gateway: Any, plan: RuntimePlan, candidate: str) -> list[str]:
    return [type(g).__name__ for g in gateway.parts.services.router.chain(plan.candidates[candidate])]


def test_a_plan_without_workers_has_no_fleet_and_its_metrics_no_worker_gauges(
    plan_data: Callable[[str], dict[str, Any]],
) -> None:
    plan = build(plan_data(CLOUD.format(url="http://127.0.0.1:9/v1")))
    gateway = build_gateway(plan, probes=False)
    assert gateway.parts.live.fleet is None
    assert gateway.parts.services.router.servers == frozenset()  # no server says its progress
    chains = {type(g).__name__ for chain in gateway.parts.services.router.chains for g in chain}
    assert "SlotGuard" not in chains  # the fleet's guards: not built
    assert "OllamaOptionsGuard" not in chains
    exposed = gateway.parts.live.metrics.exposition().decode()
    assert "interlock_worker_vram_used_bytes" not in exposed
    assert "interlock_fleet_waiting" in exposed  # the core's family, empty


def test_the_reload_that_brings_the_first_workers_plugs_the_fleet_in(
    plan_data: Callable[[str], dict[str, Any]],
) -> None:
    with FakeOpenAI(name="cloud") as cloud, FakeOpenAI(name="one") as one, FakeOpenAI(name="two") as two:
        first = build(plan_data(CLOUD.format(url=cloud.base_url)))
        workers = build(plan_data(CONFIG.format(one=one.base_url, two=two.base_url)))
        gateway = build_gateway(first, probes=False)

        async def scenario() -> tuple[int, str, dict[str, Any]]:
            await gateway.startup()
            try:
                transport = httpx.ASGITransport(app=gateway)
                async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as http:
                    assert (await http.post("/v1/chat/completions", json=HI)).status_code == 200
                    assert gateway.parts.live.fleet is None
                    gateway.parts.reloads.apply(workers)  # at plan load: the fleet plugged, its guards built
                    answer = await http.post("/v1/chat/completions", json=HI)
                    health = (await http.get("/v1/health")).json()
                    return answer.status_code, answer.headers.get("x-interlock-worker", ""), health
            finally:
                await gateway.shutdown()

        status, worker, health = asyncio.run(scenario())
        fleet = gateway.parts.live.fleet
        assert fleet is not None
        assert _chain(gateway, workers, "llama/small") == [
            "CapabilityGuard",
            "ContextGuard",
            "HealthGuard",
            "SlotGuard",
        ]
        assert gateway.parts.services.router.progress is fleet.progress
    assert status == 200
    assert worker in {"llama1", "llama2"}  # chosen by the fleet's scorer, through the slot guard
    assert fleet.scorer.report()[worker] is not None  # the slot guard scored the workers
    assert health["workers"][worker]["score"] is not None
    assert "fleet_waiting" in health["slot_state"]
    exposed = gateway.parts.live.metrics.exposition().decode()
    assert "interlock_worker_vram_used_bytes" in exposed  # the fleet's gauges, seated in the metrics
