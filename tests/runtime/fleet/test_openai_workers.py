"""Slots, queues and worker choice for OpenAI-compatible servers listed as ``workers`` (issue 22).

A llama.cpp or vLLM box behind an ``openai`` provider gets what an Ollama worker has: ``max_concurrent``,
``model_concurrency``, a bounded ``queue`` (429 + Retry-After past it), and the choice among several
boxes. The fakes hold requests until the test opens their gate; waits are on state, never on time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from interlock.commands.gateway import build_gateway
from interlock.compiler import compile_config
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.runtime.conftest import build

CONFIG = """\
version: 1
server: {{default_alias: t/chat, alias_namespace: t/}}
providers:
  llama:
    kind: openai
    probe: false
    workers:
      - name: llama1
        url: "{one}"
        max_concurrent: 1
        queue: {{max_waiting: 1, max_wait: 60s}}
      - name: llama2
        url: "{two}"
        max_concurrent: 2
        model_concurrency: {{"small*": 1, "*": 2}}
        queue: {{max_waiting: 1, max_wait: 60s}}
aliases:
  t/chat: {{description: two llama.cpp boxes, chain: [llama/small], on_saturation: queue}}
"""
HI = {"model": "t/chat", "messages": [{"role": "user", "content": "hi"}]}


def test_the_plan_gives_openai_workers_slots(plan_data: Callable[[str], dict[str, Any]]) -> None:
    plan = build(plan_data(CONFIG.format(one="http://127.0.0.1:9/v1", two="http://127.0.0.1:8/v1")))
    routes = plan.candidates["llama/small"].routes
    assert [(r.worker, r.slot_limit, r.endpoint.url, r.endpoint.label) for r in routes] == [
        ("llama1", 1, "http://127.0.0.1:9/v1", "llama@llama1"),
        ("llama2", 1, "http://127.0.0.1:8/v1", "llama@llama2"),
    ]
    assert not any(r.live_facts for r in routes)  # no /api/show or num_ctx for these
    assert plan.workers["llama1"].max_waiting == 1


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(400):  # a failure bound, not a speed: each turn yields to the loop
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"the state never came: {check.__doc__}")


def test_requests_fill_both_boxes_then_wait_in_line_then_get_429(
    plan_data: Callable[[str], dict[str, Any]],
) -> None:
    gate = threading.Event()
    with FakeOpenAI(name="one") as one, FakeOpenAI(name="two") as two:
        for fake in (one, two):
            fake.set_fault(Fault.hold(gate))
        gateway = build_gateway(
            build(plan_data(CONFIG.format(one=one.base_url, two=two.base_url))), probes=False
        )

        async def scenario() -> tuple[list[httpx.Response], httpx.Response]:
            await gateway.startup()
            try:
                transport = httpx.ASGITransport(app=gateway)
                async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as http:
                    ask = "/v1/chat/completions"
                    running = [asyncio.create_task(http.post(ask, json=HI)) for _ in range(2)]
                    await _until(lambda: one.in_flight + two.in_flight == 2)  # one on each box
                    queued = [asyncio.create_task(http.post("/v1/chat/completions", json=HI))]
                    await _until(
                        lambda: gateway.parts.live.fleet.line.waiting("llama/small") == 1
                    )  # the line: 1 waiting
                    refused = await http.post("/v1/chat/completions", json=HI)  # the line is full
                    gate.set()
                    return list(await asyncio.gather(*running, *queued)), refused
            finally:
                await gateway.shutdown()

        answers, refused = asyncio.run(scenario())
    assert [a.status_code for a in answers] == [200] * 3
    assert {a.headers["x-interlock-worker"] for a in answers[:2]} == {"llama1", "llama2"}  # one on each box
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "slots_busy"
    assert int(refused.headers["retry-after"]) >= 1


def test_base_url_and_workers_together_are_refused(tmp_path: Path) -> None:
    config = (
        "version: 1\nproviders:\n  llama:\n    kind: openai\n    base_url: http://x/v1\n"
        "    workers: [{name: w, url: 'http://y/v1'}]\naliases:\n"
        "  t/chat: {description: x, chain: [llama/small]}\n"
    )
    (tmp_path / "c.yaml").write_text(config)
    ctx = compile_config(str(tmp_path / "c.yaml"))
    assert ctx.plan is None
    assert "IL107" in {d.code for d in ctx.sink.items}
