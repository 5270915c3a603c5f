"""A call times out when the server stops making progress on it, not when an estimate runs out, and a
first-byte timeout while the server reports work in progress never counts towards the circuit (issue 38,
item 5).

The book's rules on an injected clock, with real ``/slots`` answers recorded from the real llama-server
(``tests/fixtures/signals/llama-server/prefill_*.json``); then a gateway in front of a loopback fake
llama-server that serves those recorded answers, its chat answer held by the test: a first-byte
deadline of 300 ms passes while the server reports a prefill, and the call still answers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.base.errors import FirstByteTimeout
from interlock.runtime.books.health import HealthBook
from interlock.runtime.fleet.signals import llamacpp, progress, sglang, vllm
from interlock.runtime.fleet.signals.base import ServerLoad
from interlock.runtime.fleet.signals.progress import MIN_STALL_S, ProgressBook
from interlock.runtime.loaded.tables import HealthSettings
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.runtime.books.test_health import Clock
from tests.runtime.conftest import build, compile_text

RECORDED = Path(__file__).parents[2] / "fixtures" / "signals" / "llama-server"


def recorded(name: str) -> bytes:
    return (RECORDED / name).read_bytes()


def slots(name: str) -> ServerLoad:
    return llamacpp.read({"/slots": recorded(name)})


def test_a_prefill_in_the_real_servers_slots_is_work_whose_progress_moves_per_batch() -> None:
    idle, first, second = (slots(f"prefill_{n}.json") for n in ("idle", "batch0", "batch1"))
    assert not idle.working
    assert idle.progress == ()
    assert first.working
    assert second.working
    assert first.progress == (0, 2, 0, 0)  # slot 0, task 2: none of its prompt's 2,048 first tokens read
    assert second.progress == (0, 2, 2048, 0)  # a batch later


def test_vllm_and_sglang_progress_is_their_token_counters() -> None:
    text = b"""# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 1.0
vllm:num_requests_waiting{engine="0"} 0.0
vllm:prompt_tokens_total{engine="0"} 1200.0
vllm:generation_tokens_total{engine="0"} 30.0
"""
    load = vllm.read({"/metrics": text})
    assert (load.working, load.progress) == (True, (1200, 30))
    text = b"sglang:num_running_reqs 0\nsglang:num_queue_reqs 2\n"
    load = sglang.read({"/metrics": text})
    assert (load.working, load.progress) == (True, None)  # no counters: working is all it says


def test_patience_lasts_while_progress_moves_and_ends_when_it_stops() -> None:
    clock = Clock()
    book = ProgressBook(clock=clock)
    assert book.patience("llama@box", 5.0, 600.0) is None  # never read: no patience
    book.read("llama@box", slots("prefill_idle.json"))
    clock.now += 2
    book.read("llama@box", slots("prefill_idle.json"))  # read every 2 s
    clock.now += 1
    assert book.patience("llama@box", 0.3, 0.3) == 1.5  # not read since the call began: the next is due
    book.read("llama@box", slots("prefill_idle.json"))
    assert book.patience("llama@box", 5.0, 600.0) is None  # idle: the call is not being worked on
    book.read("llama@box", slots("prefill_batch0.json"))  # our prompt's prefill began
    clock.now += 30
    assert book.patience("llama@box", 5.0, 600.0) == MIN_STALL_S - 30
    book.read("llama@box", slots("prefill_batch1.json"))  # a batch later: it moved
    clock.now += 100
    assert book.patience("llama@box", 5.0, 600.0) == 20.0  # 120 s from its last move
    clock.now += MIN_STALL_S
    assert book.patience("llama@box", 5.0, 600.0) is None  # no move for longer than the allowance: stalled
    assert book.busy("llama@box", 5.0)  # its timeout is still no count against the circuit ...
    clock.now += 30
    assert not book.busy("llama@box", 5.0)  # ... until it has not moved for twice the allowance
    book.read("llama@box", None)  # a reading failed: its work is unknown
    assert book.patience("llama@box", 5.0, 600.0) is None


def test_the_allowance_grows_with_the_longest_gap_seen_between_two_moves() -> None:
    clock = Clock()
    book = ProgressBook(clock=clock)
    book.read("w", slots("prefill_batch0.json"))
    clock.now += 100  # a loaded 1-thread CPU: 2,048 tokens in 100 s
    book.read("w", slots("prefill_batch1.json"))
    assert book.allowance_s("w", 5.0) == 200.0
    assert book.allowance_s("w", 300.0) == 300.0  # never less than the endpoint's own first_byte


def test_a_first_byte_timeout_while_the_server_works_is_busy_and_never_opens_the_circuit() -> None:
    clock = Clock()
    book = ProgressBook(clock=clock)
    health = HealthBook(
        HealthSettings(
            probe_interval_s=30,
            probe_timeout_s=1,
            failure_threshold=1,
            open_for_s=60,
            rate_limit_open_for_s=15,
        ),
        clock=clock,
    )
    book.read("w", slots("prefill_batch0.json"))
    for _ in range(5):
        busy = book.busy("w", 5.0)
        health.record_failure("p/m", "w", FirstByteTimeout("slow"), spent_s=5.0, busy=busy)
    assert health.candidate_block("p/m") is None
    assert health.candidate_report("p/m")["busy_timeouts"] == 5
    book.read("w", slots("prefill_idle.json"))  # idle: a timeout now counts
    health.record_failure("p/m", "w", FirstByteTimeout("slow"), spent_s=5.0, busy=book.busy("w", 5.0))
    assert health.candidate_block("p/m") == "circuit_open"


CONFIG = """\
version: 1
server: {{default_alias: t/chat, alias_namespace: t/}}
health: {{probe_interval: 30s, probe_timeout: 2s, failure_threshold: 1, open_for: 60s}}
providers:
  llama:
    kind: openai
    timeouts: {{connect: 1s, first_byte: 300ms, total: 60s}}
    workers:
      - {{name: box, url: "{url}", server: llama.cpp, max_concurrent: 1}}
aliases:
  t/chat: {{description: one llama-server, chain: [llama/smollm2]}}
"""
ASK = {"model": "t/chat", "messages": [{"role": "user", "content": "a long prompt"}], "stream": False}


@pytest.fixture(autouse=True)
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake holds the request before a reading is taken: any reading after shows it."""
    monkeypatch.setattr(progress, "SETTLE_S", 0.0)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(name="llama", server="llama.cpp") as fake:
        yield fake


async def until(done: Callable[[], bool]) -> None:
    """Wait for a state the gateway reaches as real time passes (a deadline of its own)."""
    for _ in range(600):
        if done():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the state was never reached")


def show(server: FakeOpenAI, name: str) -> None:
    """The fake answers ``/slots`` with the recorded answer, and ``/metrics`` with as many running."""
    server.reported.recorded_slots = recorded(name)
    server.reported.running = slots(name).running or 0


def served(tmp_path: Path, server: FakeOpenAI, reports: list[str]) -> tuple[int, dict[str, object], int]:
    """One request whose answer the fake holds while its ``/slots`` goes through ``reports`` (one per
    probe round); the gate opens once the gateway has moved the first-byte deadline on (or the call
    ended). Returns (status, the candidate's health, deadlines moved on)."""
    gate = threading.Event()
    server.set_fault(Fault.hold(gate), model="smollm2")
    show(server, reports[0])
    gw = build_gateway(build(compile_text(tmp_path, CONFIG.format(url=server.base_url))), probes=False)
    loop, book = gw.parts.loops.probes, gw.parts.live.fleet.progress

    async def scenario() -> tuple[int, dict[str, object], int]:
        await gw.startup()
        try:
            await loop.probe_all()  # the first reading
            transport = httpx.ASGITransport(app=gw)
            async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as http:
                call = asyncio.ensure_future(http.post("/v1/chat/completions", json=ASK))
                await until(lambda: server.in_flight > 0)  # the server has it: the readings below see it
                for report in reports[1:]:
                    show(server, report)
                    await loop.probe_all()  # a probe round's reading, outside the request
                await until(lambda: book.waited > 0 or call.done())  # the 300 ms deadline passes meanwhile
                gate.set()
                answer = await call
            return answer.status_code, gw.parts.live.health.candidate_report("llama/smollm2"), book.waited
        finally:
            gate.set()
            await gw.shutdown()

    return asyncio.run(scenario())


def test_a_prefill_the_server_reports_progress_on_is_never_a_timeout(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    status, health, waited = served(
        tmp_path, server, ["prefill_idle.json", "prefill_batch0.json", "prefill_batch1.json"]
    )
    assert status == 200
    assert waited >= 1  # the 300 ms deadline passed, and was moved on
    assert (health["consecutive_failures"], health["busy_timeouts"]) == (0, 0)


def test_a_server_that_reports_no_work_times_the_call_out_as_before(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    status, health, waited = served(tmp_path, server, ["prefill_idle.json", "prefill_idle.json"])
    assert status == 503
    assert waited == 0
    assert (health["last_error_class"], health["consecutive_failures"]) == ("first_byte_timeout", 1)
