"""A gateway makes the adapter of each provider kind its plans name, when a plan loads (at start, at a
reload before the plan is swapped in), never on a request: a plan of ``openai`` providers only has no
Ollama adapter."""

from __future__ import annotations

import asyncio
from pathlib import Path

from interlock.commands.gateway import build_gateway
from interlock.runtime.loaded.plan import RuntimePlan, load_plan
from tests.runtime.conftest import compile_text
from tests.runtime.test_boundaries import SMALLEST


def test_the_adapters_are_those_of_the_kinds_the_plans_name(tmp_path: Path, basic_plan: RuntimePlan) -> None:
    smallest = load_plan(compile_text(tmp_path, SMALLEST), {"CLOUD_KEY": "k"})
    assert {p.kind for p in basic_plan.providers.values()} == {"ollama", "openai"}

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        gateway = build_gateway(smallest, probes=False)
        adapters = gateway.parts.services.router.adapters
        before = sorted(adapters)
        await gateway.startup()
        try:
            started = sorted(adapters)
            gateway.apply(basic_plan)  # a reload's plan, naming Ollama too: its adapter made before it serves
            return before, started, sorted(adapters)
        finally:
            await gateway.shutdown()

    assert asyncio.run(scenario()) == ([], ["openai"], ["ollama", "openai"])
