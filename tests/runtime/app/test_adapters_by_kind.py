"""A gateway makes the adapter of each provider kind its plans name, when a plan loads (at start, at a
reload before the plan is swapped in), never on a request: a plan of ``openai`` providers only has no
Ollama adapter."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from interlock.commands.gateway import build_gateway
from interlock.runtime.loaded.plan import RuntimePlan, load_plan
from tests.runtime.conftest import compile_text, in_fresh_process
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


def test_an_adapter_imports_what_the_plans_surfaces_need_when_they_load(tmp_path: Path) -> None:
    """The OpenAI adapter's Responses relay (``wire/openai_responses.py``) and servers' tokenizers
    (``upstream/tokenize.py``, for ``count_tokens``): not imported for a plan serving OpenAI's API only,
    imported by the reload whose plan serves those surfaces, before it serves."""
    every = load_plan(compile_text(tmp_path, SMALLEST), {"CLOUD_KEY": "k"})
    text = SMALLEST.replace("{default_alias: chat}", "{default_alias: chat, surfaces: [openai]}")
    openai_only = load_plan(compile_text(tmp_path, text), {"CLOUD_KEY": "k"})
    data = orjson.dumps(every.source.model_dump(mode="json"))
    program = (
        "import orjson\n"
        "from interlock.runtime.loaded.plan import load_plan\n"
        f"every = load_plan(orjson.loads({data!r}), {{'CLOUD_KEY': 'k'}})\n"
        "names = ('interlock.runtime.wire.openai_responses', 'interlock.runtime.upstream.tokenize')\n"
        "async def scenario():\n"
        "    await gateway.startup()\n"
        "    started = [n in sys.modules for n in names]\n"
        "    gateway.apply(every)\n"
        "    reloaded = [n in sys.modules for n in names]\n"
        "    await gateway.shutdown()\n"
        "    print(started, reloaded)\n"
        "asyncio.run(scenario())\n"
    )
    assert in_fresh_process(tmp_path, openai_only, program) == "[False, False] [True, True]"
