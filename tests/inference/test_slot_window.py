"""The guaranteed window is a slot's (issue 38 item 1), learned at run time from the real llama-server.

llama-server splits ``--ctx-size`` evenly over its ``--parallel`` slots, and one request gets one slot.
A server started with 2 slots of 512 tokens (``--ctx-size 1024``) and a configuration that declares
the whole 1,024 (what one reads off the server's flags): the gateway reads the server's ``/slots`` each
round (``server: llama.cpp``), and from then on the context guard, ``/v1/aliases`` and ``/api/show``
go by the slot's 512: a ~700-token prompt goes to the fallback first (the guard, before any answer
taught it the server's counts, puts a candidate the prompt may not fit after those it fits). Before, the
declared 1,024 held: ``/v1/aliases`` and ``/api/show`` promised an agent twice the window a request gets,
and the prompt was sent to the server, which refused it (``context_too_small, called``) before the
fallback answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from interlock.commands.gateway import build_gateway
from interlock.testing.fake_openai import FakeOpenAI
from tests.inference.llama import LlamaServer
from tests.runtime.conftest import build, compile_text

pytestmark = pytest.mark.timeout(600)

SLOT = 512
CONFIG = """\
version: 1
server: {{default_alias: real/chat, alias_namespace: real/}}
preflight: {{default_output_tokens: 16}}
health: {{probe_interval: 2s, probe_timeout: 1500ms}}
providers:
  llama:
    kind: openai
    probe: false
    timeouts: {{connect: 2s, first_byte: 300s, total: 600s}}
    workers:
      - {{name: llama1, url: "{url}/v1", server: llama.cpp, max_concurrent: 2}}
  backup: {{kind: openai, base_url: "{backup}", probe: false}}
models:
  llama/smollm2: {{context_tokens: {whole}}}
  backup/big: {{context_tokens: 131072}}
aliases:
  real/chat: {{description: the real model then a large one, chain: [llama/smollm2, backup/big]}}
"""
# some 700 tokens by SmolLM2's tokenizer: over a slot's 512, under the declared 1,024
PROMPT = " ".join(f"word{i} alpha beta" for i in range(120))


@pytest.fixture
def two_slots(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("slots") / "server.log"
    with LlamaServer(model, log, n_ctx=SLOT, parallel=2, threads=1) as server:
        yield server


def test_the_window_is_a_slot_s_as_the_server_says(tmp_path: Path, two_slots: LlamaServer) -> None:
    props = httpx.get(f"{two_slots.url}/props", timeout=30).json()
    assert (props["total_slots"], props["default_generation_settings"]["n_ctx"]) == (2, SLOT)
    with FakeOpenAI(name="backup") as backup:
        text = CONFIG.format(url=two_slots.url, backup=backup.base_url, whole=SLOT * 2)
        gw = build_gateway(build(compile_text(tmp_path, text)))

        async def scenario() -> tuple[Any, Any, httpx.Response, Any]:
            await gw.startup()
            await gw.parts.loops.probes.first_round.wait()  # the server's /slots read once
            try:
                transport = httpx.ASGITransport(app=gw)
                async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=300) as http:
                    aliases = (await http.get("/v1/aliases")).json()
                    shown = (await http.post("/api/show", json={"model": "real/chat"})).json()
                    ask = {"model": "real/chat", "messages": [{"role": "user", "content": PROMPT}]}
                    answer = await http.post("/v1/chat/completions", json={**ask, "max_tokens": 16})
                    health = (await http.get("/v1/health")).json()
                return aliases, shown, answer, health
            finally:
                await gw.shutdown()

        aliases, shown, answer, health = asyncio.run(scenario())
    alias = next(a for a in aliases["data"] if a["name"] == "real/chat")
    assert alias["contract"]["window_tokens"] == SLOT * 2  # as compiled from the declaration
    assert alias["window_tokens"] == SLOT  # as the server says now: what an agent is told
    assert shown["model_info"]["interlock.context_length"] == SLOT
    assert health["workers"]["llama1"]["server"]["slot_window"] == SLOT
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-interlock-resolved"] == "backup/big"  # the slot cannot hold it
    # put after the fallback on the slot's window, never called (before: called, and refused by the server)
    assert "llama/smollm2" not in answer.headers.get("x-interlock-skipped", "")
