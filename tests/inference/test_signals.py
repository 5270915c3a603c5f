"""Load signals against the real llama.cpp server this tier runs (issue 25, item 3).

What it really serves: the tier runs llama-cpp-python's server (``python -m llama_cpp.server``, 0.3.36),
not llama.cpp's C++ ``llama-server``. It serves the OpenAI API under ``/v1`` and ``/extras/tokenize``,
and answers 404 to ``/metrics``, ``/slots``, ``/health`` and ``/props``: there is no load of its own to
read. So a worker declared ``server: llama.cpp`` in front of it gets an unknown load (never a made-up
idle one), both fetches are counted as failed, and the choice falls back to the gateway's own slots. The
readers themselves are held to the C++ server's documented answers in tests/runtime/fleet/test_signals.py.
A test here fails the day the real server starts answering those paths, so the docs can say so.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from interlock.commands.gateway import build_gateway
from tests.inference.conftest import Real
from tests.runtime.conftest import build, compile_text

pytestmark = pytest.mark.timeout(900)

CONFIG = """\
version: 1
server: {{default_alias: real/chat, alias_namespace: real/}}
preflight: {{default_output_tokens: 8}}
health: {{probe_interval: 30s, probe_timeout: 10s}}
providers:
  llama:
    kind: openai
    probe: false
    timeouts: {{connect: 2s, first_byte: 300s, total: 600s}}
    workers:
      - {{name: llama1, url: "{chat}/v1", server: llama.cpp, max_concurrent: 1}}
aliases:
  real/chat: {{description: the real model, chain: [llama/smollm2]}}
"""


@pytest.mark.parametrize("path", ["/metrics", "/slots", "/health", "/props"])
def test_llama_cpp_pythons_server_serves_no_load_of_its_own(real: Real, path: str) -> None:
    assert httpx.get(f"{real.chat.url}{path}", timeout=30).status_code == 404


def test_a_server_without_load_signals_is_unknown_and_still_chosen(real: Real, tmp_path: Path) -> None:
    gateway = build_gateway(build(compile_text(tmp_path, CONFIG.format(chat=real.chat.url))), probes=False)

    async def scenario() -> tuple[object, str, httpx.Response]:
        await gateway.startup()
        try:
            await gateway.probe_loop.probe_all()
            load = gateway.live.facts.load("llama@llama1")
            transport = httpx.ASGITransport(app=gateway)
            async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=300) as http:
                body = {
                    "model": "real/chat",
                    "messages": [{"role": "user", "content": "Hi."}],
                    "max_tokens": 4,
                }
                answer = await http.post("/v1/chat/completions", json=body)
                metrics = (await http.get("/metrics")).text
            return load, metrics, answer
        finally:
            await gateway.shutdown()

    load, metrics, answer = asyncio.run(scenario())
    assert load is None
    for path in ("/metrics", "/slots"):
        labels = f'endpoint="llama@llama1",path="{path}",result="client_error"'
        assert f"interlock_metadata_fetches_total{{{labels}}} 1.0" in metrics
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-interlock-worker"] == "llama1"
