"""A prefill the real llama-server reports progress on is never a timeout and never opens the circuit
(issue 38, item 5), on a loaded machine.

A server of one slot and one thread, a CPU hog beside it, and a gateway in front of it that reads the
server's ``/slots`` every 2 s (``server: llama.cpp``) with a first-byte deadline of 2 s and no learned
prompt speed (a restarted gateway): a prompt of some 1,500 tokens takes the server tens of seconds to
read, far past the 2 s, and must still answer, with nothing counted against the candidate. Before, it
was a 503 ``first_byte_timeout`` at 2 s, and with ``failure_threshold: 1`` the circuit opened.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from interlock.commands.gateway import build_gateway
from tests.inference.llama import LlamaServer
from tests.runtime.conftest import build, compile_text

pytestmark = pytest.mark.timeout(900)

CONFIG = """\
version: 1
server: {{default_alias: real/chat, alias_namespace: real/}}
preflight: {{default_output_tokens: 4}}
health: {{probe_interval: 2s, probe_timeout: 1500ms, failure_threshold: 1, open_for: 60s}}
providers:
  llama:
    kind: openai
    probe: false
    timeouts: {{connect: 2s, first_byte: 2s, total: 600s}}
    workers:
      - {{name: llama1, url: "{url}/v1", server: llama.cpp, max_concurrent: 1}}
aliases:
  real/chat: {{description: the real model, chain: [llama/smollm2]}}
"""
PROMPT = " ".join(f"item{i} alpha beta gamma" for i in range(240))  # some 1,500 tokens


@pytest.fixture
def hog() -> Iterator[None]:
    """A CPU hog beside the server for the test's length: the load of a busy machine."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def single(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("progress") / "server.log"
    with LlamaServer(model, log, n_ctx=4096, parallel=1, threads=1) as server:
        yield server


def test_a_long_prefill_under_load_answers_and_counts_nothing_against_the_circuit(
    tmp_path: Path, single: LlamaServer, hog: None
) -> None:
    plan = build(compile_text(tmp_path, CONFIG.format(url=single.url)))
    gw = build_gateway(plan)

    async def scenario() -> tuple[int, dict[str, object], int, dict[str, object]]:
        await gw.startup()  # the probe loop reads /slots every 2 s from now on
        await gw.parts.loops.probes.first_round.wait()  # ready: the server read once (serve waits too)
        try:
            transport = httpx.ASGITransport(app=gw)
            async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=700) as http:
                ask = {
                    "model": "real/chat",
                    "messages": [{"role": "user", "content": PROMPT}],
                    "max_tokens": 4,
                }
                answer = await http.post("/v1/chat/completions", json=ask)
                health = (await http.get("/v1/health")).json()
            live = gw.parts.live
            report = live.health.candidate_report("llama/smollm2")
            return answer.status_code, report, live.fleet.progress.waited, health
        finally:
            await gw.shutdown()

    status, report, waited, health = asyncio.run(scenario())
    assert status == 200
    assert waited >= 1  # its 2 s first-byte deadline passed while the server read the prompt
    assert (report["consecutive_failures"], report["busy_timeouts"], report["circuit_open_until"]) == (
        0,
        0,
        None,
    )
    assert set(health["workers"]["llama1"]["server"]["progress"]) == {
        "working",
        "moved_s_ago",
        "stall_allowance_s",
    }
    assert "llama@llama1" in health["learned"]  # the speed learned from this answer: the next estimate
