"""Recovery seen within seconds of the upstream's own, whatever the outage's length (issue 40, item 2).

A ``[primary, backup]`` chain under steady traffic (one request a second, through the gateway), the
primary down for 50, 60, 70 and 130 s: refusing connections, answering 503 to everything, or its model
answering 503 while the server still lists it (seen at once only with ``recovery_check: request``; with
the default check, by the circuit's own trials, at most ``open_for`` apart). Real
requests and real checks of fake upstreams on loopback; the gateway's clock is injected and advanced a
second at a time, the probe loop's rounds run by hand when due: no test waits for time to pass.
Before this, recovery was timed by ``open_for`` alone: down 70 s, the trial at 68 s hit the outage's
last second and the primary came back into use at 128 s, 58 s after it recovered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.books.recovery import CHECK_MAX_S
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.runtime.books.test_health import Clock
from tests.runtime.conftest import build, compile_text

CONFIG = """\
version: 1
server: {{default_alias: t/chat, alias_namespace: t/}}
health: {{probe_interval: 30s, probe_timeout: 2s, failure_threshold: 2, open_for: 60s}}
providers:
  primary:
    kind: openai
    base_url: "{primary}"
    timeouts: {{connect: 500ms, first_byte: 5s, total: 10s}}
{extra}
  backup: {{kind: openai, base_url: "{backup}", timeouts: {{connect: 500ms, first_byte: 5s, total: 10s}}}}
aliases:
  t/chat: {{description: a primary and its fallback, chain: [primary/m, backup/m]}}
"""
ASK = {"model": "t/chat", "messages": [{"role": "user", "content": "hi"}], "stream": False}
TARGET_S = 30.0  # issue 40: back in use within 30 s of its recovery
# checks back off to 8 s at most and a pass brings the trial to now: seen within one check (9 s), two
# when a check on a loaded machine ran past its probe timeout (real time) while the fake was up
SOON_S = 2 * CHECK_MAX_S + 1.0


@pytest.fixture
def upstreams() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    with FakeOpenAI(name="primary") as primary, FakeOpenAI(name="backup") as backup:
        yield primary, backup


def drill(
    tmp_path: Path, primary: FakeOpenAI, backup: FakeOpenAI, down_s: float, how: str, extra: str = ""
) -> float:
    """Seconds from the primary's recovery to the first request it answered again."""
    clock = Clock()
    text = CONFIG.format(primary=primary.base_url, backup=backup.base_url, extra=extra)
    plan = build(compile_text(tmp_path, text))
    gw = build_gateway(plan, probes=False, clock=clock)
    loop = gw.parts.loops.probes
    start = clock.now

    def down() -> None:
        if how == "refused":
            primary.refuse_connections()
        elif how == "model":  # the model fails; the server answers its listing
            primary.set_fault(Fault.http_status(503, "model crashed"), model="m")
        else:
            primary.set_fault(Fault.http_status(503, "down for maintenance"))

    def up() -> None:
        if how == "refused":
            primary.accept_connections()
        else:
            primary.clear_faults()

    async def scenario() -> float:
        await gw.startup()
        try:
            await loop.round()
            transport = httpx.ASGITransport(app=gw)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                down()
                recovered = False
                while clock.now - start < down_s + 120:
                    if not recovered and clock.now - start >= down_s:
                        up()
                        recovered = True
                    if loop.pause_s() <= 0:
                        await loop.round()
                    answer = await http.post("/v1/chat/completions", json=ASK)
                    assert answer.status_code == 200, answer.text
                    if recovered and answer.headers["x-interlock-resolved"] == "primary/m":
                        return clock.now - start - down_s
                    clock.now += 1.0
        finally:
            await gw.shutdown()
        raise AssertionError("the primary was never used again")

    return asyncio.run(scenario())


@pytest.mark.parametrize("how", ["refused", "503"])
@pytest.mark.parametrize("down_s", [50.0, 60.0, 70.0, 130.0])
def test_a_primary_down_for_any_length_is_back_in_use_within_seconds_of_its_recovery(
    tmp_path: Path, upstreams: tuple[FakeOpenAI, FakeOpenAI], down_s: float, how: str
) -> None:
    primary, backup = upstreams
    late = drill(tmp_path, primary, backup, down_s, how)
    assert late <= TARGET_S
    assert late <= SOON_S


@pytest.mark.parametrize(
    "extra",
    ["    recovery_check: request", "    probe: false\n    recovery_check: request"],
    ids=["request", "no-probe"],
)
@pytest.mark.parametrize("down_s", [50.0, 60.0, 70.0, 130.0])
def test_a_model_that_fails_while_its_server_lists_it_is_seen_by_a_1_token_check(
    tmp_path: Path, upstreams: tuple[FakeOpenAI, FakeOpenAI], down_s: float, extra: str
) -> None:
    primary, backup = upstreams
    late = drill(tmp_path, primary, backup, down_s, "model", extra)
    assert late <= SOON_S
    chats = [r for r in primary.requests if r.path == "/v1/chat/completions"]
    assert any(r.body.get("max_tokens") == 1 for r in chats)  # the checks: 1-token requests to the model


@pytest.mark.parametrize("down_s", [50.0, 70.0, 130.0])
def test_with_the_default_check_a_model_failure_is_seen_by_the_circuits_trials(
    tmp_path: Path, upstreams: tuple[FakeOpenAI, FakeOpenAI], down_s: float
) -> None:
    """A listing that never failed says nothing: the trials alone, 7.5, 15, 30, then 60 s apart."""
    primary, backup = upstreams
    late = drill(tmp_path, primary, backup, down_s, "model")
    assert late <= 61.0
