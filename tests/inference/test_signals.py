"""Load signals read from the real ``llama-server`` (issue 25 item 3, issue 29 item 5).

The server (xllamacpp's, ``/metrics`` and ``/slots`` on) is sampled idle, with one stream running, and
with both its slots busy and more requests deferred; the reader must say what the server says at each
moment. The texts are the server's own, live: with ``INTERLOCK_RECORD_SIGNALS=<folder>`` they are also
written there (how tests/fixtures/signals/llama-server/live_* were recorded). Then a gateway with
``server: llama.cpp`` in front of it reads the same load and still answers through it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.fleet.signals import llamacpp
from interlock.runtime.fleet.signals.base import ServerLoad
from tests.e2e.harness import wait_until
from tests.inference.llama import LlamaServer
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
      - {{name: llama1, url: "{url}/v1", server: llama.cpp, max_concurrent: 2}}
aliases:
  real/chat: {{description: the real model, chain: [llama/smollm2]}}
"""
WAIT_S = 300  # a failure bound on a loaded 2-core machine, not a speed


@pytest.fixture(scope="module")
def pair(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A server of two slots, for these tests alone (the tier's chat server has one)."""
    with LlamaServer(model, tmp_path_factory.mktemp("signals") / "pair.log", parallel=2) as server:
        yield server


def sample(server: LlamaServer, moment: str) -> dict[str, bytes]:
    bodies = {path: httpx.get(f"{server.url}{path}", timeout=60).content for path in ("/metrics", "/slots")}
    folder = os.environ.get("INTERLOCK_RECORD_SIGNALS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"live_metrics_{moment}.txt").write_bytes(bodies["/metrics"])
        (Path(folder) / f"live_slots_{moment}.json").write_bytes(bodies["/slots"])
    return bodies


def long_stream(server: LlamaServer, index: int, done: list[int]) -> None:
    """A stream long enough to be sampled while it runs (``ignore_eos``: it never stops early)."""
    ask = [{"role": "user", "content": f"Tell a long story ({index})."}]
    body = {"messages": ask, "max_tokens": 160, "ignore_eos": True, "stream": True, "temperature": 0}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=600) as answer:
        assert answer.status_code == 200
        for _ in answer.iter_lines():
            pass
    done.append(index)


def reading_when(server: LlamaServer, moment: str, ready: object) -> tuple[ServerLoad, dict[str, bytes]]:
    """The reader's view of the first sample at which ``ready(load)`` holds."""
    found: list[tuple[ServerLoad, dict[str, bytes]]] = []

    def check() -> bool:
        bodies = sample(server, moment)
        load = llamacpp.read(bodies)
        if ready(load):  # type: ignore[operator]
            found.append((load, bodies))
            return True
        return False

    wait_until(check, WAIT_S, f"llama-server {moment}")
    return found[0]


def test_the_reader_says_what_the_live_server_says_idle_busy_and_deferred(pair: LlamaServer) -> None:
    idle, bodies = reading_when(pair, "idle", lambda load: load.running == 0)
    assert (idle.running, idle.waiting, idle.slots) == (0, 0, 2)
    assert all(slot["is_processing"] is False for slot in orjson.loads(bodies["/slots"]))

    done: list[int] = []
    threads = [threading.Thread(target=long_stream, args=(pair, 0, done))]
    threads[0].start()
    busy, bodies = reading_when(pair, "busy", lambda load: load.running == 1)
    assert (busy.waiting, busy.slots) == (0, 2)
    assert [slot["is_processing"] for slot in orjson.loads(bodies["/slots"])].count(True) == 1

    threads += [threading.Thread(target=long_stream, args=(pair, i, done)) for i in (1, 2, 3)]
    for thread in threads[1:]:
        thread.start()
    deferred, bodies = reading_when(pair, "deferred", lambda load: load.waiting)
    assert (deferred.running, deferred.slots) == (2, 2)
    assert deferred.waiting in (1, 2)
    assert deferred.cached_tokens  # the busy slots' prompts and what they generated so far
    assert all(slot["is_processing"] for slot in orjson.loads(bodies["/slots"]))
    for thread in threads:
        thread.join(WAIT_S)
    assert sorted(done) == [0, 1, 2, 3]


def test_a_gateway_reads_the_live_servers_load_and_answers_through_it(
    pair: LlamaServer, tmp_path: Path
) -> None:
    gateway = build_gateway(build(compile_text(tmp_path, CONFIG.format(url=pair.url))), probes=False)

    async def scenario() -> tuple[ServerLoad | None, str, httpx.Response]:
        await gateway.startup()
        try:
            await gateway.parts.loops.probes.probe_all()
            load = gateway.parts.live.fleet.facts.load("llama@llama1")
            transport = httpx.ASGITransport(app=gateway)
            async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=300) as http:
                hi = [{"role": "user", "content": "Hi."}]
                ask = {"model": "real/chat", "messages": hi, "max_tokens": 4}
                answer = await http.post("/v1/chat/completions", json=ask)
                metrics = (await http.get("/metrics")).text
            return load, metrics, answer
        finally:
            await gateway.shutdown()

    wait_until(lambda: llamacpp.read(sample(pair, "before-gateway")).busy == 0, WAIT_S, "an idle server")
    load, metrics, answer = asyncio.run(scenario())
    assert load is not None
    assert (load.running, load.waiting, load.slots) == (0, 0, 2)
    for path in ("/metrics", "/slots"):
        labels = f'endpoint="llama@llama1",path="{path}",result="ok"'
        assert f"interlock_metadata_fetches_total{{{labels}}} 1.0" in metrics
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-interlock-worker"] == "llama1"
