"""`interlock connect` asks a gateway for an alias's window and output ceiling: ``POST /api/show`` (the
Ollama surface's), and where the gateway does not serve it (``server.surfaces`` without ``ollama``),
``GET /v1/models/{alias}``; both against a gateway served on a loopback port."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from interlock.commands.connect import Unanswered, alias_limits
from interlock.commands.gateway import build_gateway
from interlock.runtime.loaded.plan import load_plan
from interlock.testing.in_process import serving
from tests.runtime.conftest import compile_text

PLAN = """\
version: 1
server: {{default_alias: chat{surfaces}}}
providers:
  cloud:
    kind: openai
    base_url: http://127.0.0.1:9/v1
    api_key_env: CLOUD_KEY
models:
  cloud/c1: {{context_tokens: 32768, max_output_tokens: 4096}}
aliases:
  chat:
    chain: [cloud/c1]
"""


def limits(tmp_path: Path, surfaces: str, alias: str) -> tuple[int | None, int | None]:
    plan = load_plan(compile_text(tmp_path, PLAN.format(surfaces=surfaces)), {"CLOUD_KEY": "k"})

    async def scenario() -> tuple[int | None, int | None]:
        async with serving(build_gateway(plan, probes=False)) as port:
            return await asyncio.to_thread(alias_limits, f"http://127.0.0.1:{port}", alias, None, 5.0)

    return asyncio.run(scenario())


@pytest.mark.parametrize("surfaces", ["", ", surfaces: [openai]"], ids=["all", "openai-only"])
def test_the_window_and_ceiling_with_or_without_the_ollama_surface(tmp_path: Path, surfaces: str) -> None:
    assert limits(tmp_path, surfaces, "chat") == (32768, 4096)


@pytest.mark.parametrize("surfaces", ["", ", surfaces: [openai]"], ids=["all", "openai-only"])
def test_an_alias_the_gateway_lacks_is_said_to_be_missing(tmp_path: Path, surfaces: str) -> None:
    with pytest.raises(Unanswered, match="has no alias `other`"):
        limits(tmp_path, surfaces, "other")
