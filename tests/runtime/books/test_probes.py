"""A worker that comes up is seen within seconds (issue 29, item 4): a down worker is probed again on a
short back-off between probe rounds, and a request that finds its worker full brings that probe forward.

Real probes of fake Ollama workers on loopback (one refuses connections while "down"); the probe loop's
clock is injected, and each round is run directly: no test waits for time to pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.app.gateway import Gateway
from interlock.runtime.books.probes import RECHECK_FIRST_S, RECHECK_MAX_S
from interlock.testing.fake_ollama import FakeOllama
from tests.runtime.books.test_health import Clock
from tests.runtime.conftest import build, compile_text

CONFIG = """\
version: 1
server: {{default_alias: t/chat, alias_namespace: t/}}
health: {{probe_interval: 60s, probe_timeout: 1s, failure_threshold: 2, open_for: 30s}}
providers:
  local:
    kind: ollama
    timeouts: {{connect: 500ms, first_byte: 5s, total: 10s}}
    workers:
      - {{name: up, url: "{up}", max_concurrent: 1, queue: {{max_waiting: 0, max_wait: 1s}}}}
      - {{name: down, url: "{down}", max_concurrent: 1}}
aliases:
  t/chat: {{description: two workers, chain: [local/llama3.2:3b]}}
"""


@pytest.fixture
def workers() -> Iterator[tuple[FakeOllama, FakeOllama]]:
    with FakeOllama(name="up") as up, FakeOllama(name="down") as down:
        down.refuse_connections()
        yield up, down


def probes_of(fake: FakeOllama) -> int:
    return sum(1 for r in fake.requests if r.path == "/api/tags")


def gateway(tmp_path: Path, up: FakeOllama, down: FakeOllama, clock: Clock) -> Gateway:
    plan = build(compile_text(tmp_path, CONFIG.format(up=up.url, down=down.url)))
    return build_gateway(plan, probes=False, clock=clock)


def test_a_down_worker_is_probed_again_on_a_doubling_back_off_and_seen_when_it_comes_up(
    tmp_path: Path, workers: tuple[FakeOllama, FakeOllama]
) -> None:
    up, down = workers
    clock = Clock()
    gw = gateway(tmp_path, up, down, clock)
    loop, live = gw.parts.loops.probes, gw.parts.live

    async def scenario() -> list[tuple[float, int, int, bool]]:
        seen = []
        await gw.startup()
        try:
            await loop.round()  # the first round: every worker
            seen.append(
                (loop.pause_s(), probes_of(up), len(loop.rechecks), live.health.endpoint_usable("local@down"))
            )
            for _ in range(5):  # still down: probed alone, each back-off twice the last, to the ceiling
                clock.now += loop.pause_s()
                await loop.round()
                seen.append((loop.pause_s(), probes_of(up), len(loop.rechecks), False))
            down.accept_connections()
            clock.now += loop.pause_s()
            await loop.round()
            seen.append(
                (loop.pause_s(), probes_of(up), len(loop.rechecks), live.health.endpoint_usable("local@down"))
            )
        finally:
            await gw.shutdown()
        return seen

    seen = asyncio.run(scenario())
    pauses = [pause for pause, *_ in seen]
    assert pauses[:6] == [RECHECK_FIRST_S, 2.0, 4.0, RECHECK_MAX_S, RECHECK_MAX_S, RECHECK_MAX_S]
    assert len({probes for _, probes, _, _ in seen}) == 1  # the worker that is up: only the full round
    assert seen[0][2:] == (1, False)
    assert seen[-1][2:] == (0, True)  # up after 1 + 2 + 4 + 8 + 8 + 8 = 31 s of back-off, not a round
    assert pauses[-1] > RECHECK_MAX_S  # nothing down: the next full round
    assert clock.now - 1000.0 == 31.0


def test_a_request_that_finds_its_worker_full_brings_the_down_workers_probe_forward(
    tmp_path: Path, workers: tuple[FakeOllama, FakeOllama]
) -> None:
    up, down = workers
    clock = Clock()
    gw = gateway(tmp_path, up, down, clock)
    loop, live = gw.parts.loops.probes, gw.parts.live

    async def scenario() -> tuple[float, float, int, float, bool]:
        await gw.startup()
        try:
            await loop.round()
            for _ in range(3):  # down for a while: its back-off has grown to 8 s
                clock.now += loop.pause_s()
                await loop.round()
            before = loop.pause_s()
            clock.now += 0.25  # the probe that found it down was 0.25 s ago
            held = await live.slots.acquire("up", "llama3.2:3b", 1, wait=False)  # the up worker is full
            assert held is not None
            transport = httpx.ASGITransport(app=gw)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                ask = {"model": "t/chat", "messages": [{"role": "user", "content": "hi"}], "stream": False}
                refused = await http.post("/api/chat", json=ask)
            after = loop.pause_s()
            down.accept_connections()
            clock.now += after
            await loop.round()
            await held.release()
            return before, after, refused.status_code, clock.now, live.health.endpoint_usable("local@down")
        finally:
            await gw.shutdown()

    before, after, status, _, usable = asyncio.run(scenario())
    assert before == RECHECK_MAX_S
    assert status == 429  # every worker busy (the other down), no queue: refused as before
    assert after == RECHECK_FIRST_S - 0.25  # brought forward: one second after the last probe
    assert usable


def test_a_woken_loop_runs_its_round_before_the_pause_ends(
    tmp_path: Path, workers: tuple[FakeOllama, FakeOllama]
) -> None:
    """``busy`` wakes the running loop: the down worker is probed although its pause is far from over."""
    up, down = workers
    clock = Clock()
    gw = gateway(tmp_path, up, down, clock)
    loop = gw.parts.loops.probes

    async def scenario() -> int:
        await gw.startup()
        try:
            await loop.round()
            for _ in range(3):
                clock.now += loop.pause_s()
                await loop.round()
            clock.now += 2.0  # the frozen clock says 6 s of the 8 s pause are left: the loop sleeps
            probed = probes_of(down)
            down.accept_connections()
            loop.start()
            await asyncio.sleep(0.05)  # the loop's first round ran and found nothing due: it sleeps
            assert loop.rechecks
            assert probes_of(down) == probed
            loop.busy()
            for _ in range(500):  # a failure bound: the woken round runs at once
                if not loop.rechecks:
                    break
                await asyncio.sleep(0.01)
            return probes_of(down) - probed
        finally:
            await loop.stop()
            await gw.shutdown()

    assert asyncio.run(scenario()) == 1
