"""Load signals from OpenAI-compatible servers (issue 25, item 3): reading llama.cpp's, vLLM's and SGLang's
own words (fixtures built from their documentation: tests/fixtures/signals/README.md), and worker choice
among openai-kind workers on loopback, with fakes that serve those servers' /metrics and /slots."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from interlock.commands.gateway import build_gateway
from interlock.common.kinds import SERVER_KINDS
from interlock.runtime.fleet.live_facts import LiveFacts
from interlock.runtime.fleet.signals import SERVERS, llamacpp, sglang, vllm
from interlock.runtime.fleet.signals.base import ServerLoad, total
from interlock.runtime.fleet.signals.choice import KV_FULL, rate_server
from interlock.runtime.fleet.signals.exposition import samples
from interlock.runtime.loaded.tables import RoutingWeights
from interlock.schema.plan import PlanWorker
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.conftest import ROOT
from tests.runtime.conftest import build

FIXTURES = ROOT / "tests" / "fixtures" / "signals"
WEIGHTS = RoutingWeights(100.0, 10.0, 5.0, 20.0, 0.2, 30.0, 20.0, 1000.0)


def body(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_every_server_kind_is_one_row_and_one_name_everywhere() -> None:
    assert set(SERVERS) == set(SERVER_KINDS)
    server = PlanWorker.model_fields["server"].annotation
    assert set(get_args(get_args(server)[0])) == set(SERVER_KINDS)  # Literal[...] | None


@pytest.mark.parametrize(
    ("read", "bodies", "expected"),
    [
        (vllm.read, {"/metrics": "vllm-metrics.txt"}, ServerLoad(running=12, waiting=2, kv_used=0.61)),
        (vllm.read, {"/metrics": "vllm-v0-metrics.txt"}, ServerLoad(running=3, waiting=1, kv_used=0.9612)),
        (
            sglang.read,
            {"/metrics": "sglang-metrics.txt"},
            ServerLoad(running=28, waiting=2826, kv_used=0.28, cached_tokens=123859),
        ),
        (
            llamacpp.read,
            {"/metrics": "llamacpp-metrics.txt", "/slots": "llamacpp-slots.json"},
            ServerLoad(running=1, waiting=3, slots=2, kv_used=0.35, cached_tokens=1434, window=1024),
        ),
        (llamacpp.read, {"/slots": "llamacpp-slots.json"}, ServerLoad(running=1, slots=2, window=1024)),
        (llamacpp.read, {"/slots": "llamacpp-slots-old.json"}, ServerLoad(running=2, slots=3, window=1024)),
        (
            llamacpp.read,
            {"/metrics": "llamacpp-metrics.txt"},  # /slots off (newer builds: off unless --slots)
            ServerLoad(running=1, waiting=3, kv_used=0.35, cached_tokens=1434),
        ),
    ],
)
def test_each_server_kind_reads_its_documented_metrics(
    read: Callable[[dict[str, bytes]], ServerLoad], bodies: dict[str, str], expected: ServerLoad
) -> None:
    assert read({path: body(name) for path, name in bodies.items()}) == expected


@pytest.mark.parametrize(
    ("read", "answer", "why"),
    [
        (vllm.read, {"/metrics": "sglang-metrics.txt"}, r"^no vllm:num_requests_\* in /metrics$"),
        (sglang.read, {"/metrics": "vllm-metrics.txt"}, r"^no sglang:num_\*_reqs in /metrics$"),
        (llamacpp.read, {"/metrics": "vllm-metrics.txt"}, r"^no llamacpp:requests_\* in /metrics$"),
        (llamacpp.read, {"/slots": "vllm-metrics.txt"}, r"^unexpected character"),  # not JSON
    ],
)
def test_another_servers_answer_is_refused_not_read_as_idle(
    read: Callable[[dict[str, bytes]], ServerLoad], answer: dict[str, str], why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        read({path: body(name) for path, name in answer.items()})


# The real llama-server's answers (tests/fixtures/signals/llama-server: captured, not built): (running,
# waiting, slots, the tokens the slots hold: each slot's n_prompt_tokens + next_token[0].n_decoded).
CAPTURED = {
    "idle": (0, 0, 2, None),  # slots never used: no n_prompt_tokens
    "busy1": (1, 0, 2, 45 + 4453 + 342),  # slot 0 ended (its prompt kept), slot 1 generating
    "busy2_outside": (2, 0, 2, 310),
    "deferred1": (2, 1, 2, 454),
    "deferred_xl-a_0": (2, 3, 2, 142),
    "deferred_xl-a_1": (2, 3, 2, 122),
    "deferred_xl-a_2": (2, 1, 2, 122),
    "live_idle": (0, 0, 2, None),  # recorded by tests/inference/test_signals.py
    "live_busy": (1, 0, 2, 37),
    "live_deferred": (2, 2, 2, 37 + 0 + 38 + 1),
}


@pytest.mark.parametrize("moment", sorted(CAPTURED))
def test_the_real_llama_servers_answers_read_as_it_said(moment: str) -> None:
    prefix = "live_" if moment.startswith("live_") else ""
    stem = moment.removeprefix("live_")
    metrics = body(f"llama-server/{prefix}metrics_{stem}.txt")
    listed = body(f"llama-server/{prefix}slots_{stem}.json")
    running, waiting, slots, held = CAPTURED[moment]
    window = min(slot["n_ctx"] for slot in orjson.loads(listed))  # a slot's: --ctx-size over --parallel
    both = llamacpp.read({"/metrics": metrics, "/slots": listed})
    assert both == ServerLoad(
        running=running, waiting=waiting, slots=slots, cached_tokens=held, window=window
    )
    assert both.kv_used is None  # this build has no llamacpp:kv_cache_usage_ratio: unknown, never 0
    alone = ServerLoad(running=running, slots=slots, cached_tokens=held, window=window)
    assert llamacpp.read({"/slots": listed}) == alone
    assert llamacpp.read({"/metrics": metrics}) == ServerLoad(running=running, waiting=waiting)


def test_a_slot_s_window_is_the_smallest_bounded_n_ctx_the_slots_say() -> None:
    """Each slot's ``n_ctx`` bounded as every window a server reports: an odd one is no window."""
    slots = [{"id": 0, "n_ctx": 4096}, {"id": 1, "n_ctx": 2048}, {"id": 2, "n_ctx": -1}, {"id": 3}]
    assert llamacpp.read({"/slots": orjson.dumps(slots)}).window == 2048
    odd = b'[{"id": 0, "n_ctx": 1e30}, {"id": 1, "n_ctx": "8192"}, {"id": 2, "n_ctx": true}]'
    assert llamacpp.read({"/slots": odd}).window is None


def test_a_slot_window_goes_when_a_reading_says_none_and_stays_when_a_reading_fails() -> None:
    """A server restarted with a larger ``--ctx-size`` and ``/slots`` off must not stay capped at the
    window it had: a reading that says no window drops the cap; a failed reading keeps it."""
    facts = LiveFacts()
    facts.put_load("box", ServerLoad(running=0, window=2048))
    facts.put_load("box", None)  # the reading failed: unknown, the window of the last one kept
    assert facts.table.slot_windows == {"box": 2048}
    facts.put_load("box", ServerLoad(running=0))
    assert facts.table.slot_windows == {}


def test_a_gauges_sum_past_any_true_count_is_unknown_not_a_crash() -> None:
    """Finite samples whose sum overflows to infinity made ``round`` raise OverflowError."""
    assert total([1e308, 1e308]) is None
    assert total([-1e308, -1e308]) is None
    assert total([1e20]) is None
    assert total([2.0, 3.4]) == 5
    assert total([-3.0]) == 0
    assert total([]) is None


def test_a_slots_answer_that_is_not_a_list_of_slots_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^/slots is not a list of slots$"):
        llamacpp.read({"/slots": b'{"error": "This server does not support slots endpoint."}'})


@pytest.mark.parametrize("name", sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.txt")))
def test_the_lean_reader_agrees_with_prometheus_clients_parser(name: str) -> None:
    text = body(name).decode()
    reference: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # llama-server types `llamacpp:n_tokens_max` a counter without `_total`: the parser adds one
            named = sample.name if sample.name in text else sample.name.removesuffix("_total")
            reference.setdefault(named, []).append(sample.value)
    finite = {n: [v for v in values if abs(v) != float("inf")] for n, values in reference.items()}
    assert finite  # a fixture the reference reads nothing of would prove nothing
    assert samples(text, finite.keys()) == {n: v for n, v in finite.items() if v}


def test_the_lean_reader_skips_odd_lines_and_non_numbers() -> None:
    text = 'a 1\n\n# HELP a x\nb{x="}"} 2 1700000000\nc NaN\nd{q="a b"} 4\nbad\n{x="1"} 5\ne zz\n'
    assert samples(text, {"a", "b", "c", "d", "e"}) == {"a": [1.0], "b": [2.0], "d": [4.0]}


def rate(load: ServerLoad | None, occupancy: tuple[int, int, int], **kw: Any) -> float:
    expected, _ = rate_server(load, occupancy, kw.get("slots", 1), 2.0, kw.get("line"), WEIGHTS, 0.0, 0.0)
    return expected


def test_expected_wait_counts_the_servers_own_load_and_ours() -> None:
    assert rate(None, (1, 0, 0)) == 0.0  # nothing known, a slot free: starts at once
    assert rate(ServerLoad(running=1), (1, 0, 0)) == 2.0  # others keep its one slot busy
    assert rate(ServerLoad(running=3, waiting=2, slots=4), (1, 0, 0)) == 1.0  # 5 + 1 − 4 = 2 × 2 s / 4
    assert rate(ServerLoad(running=0), (0, 2, 1)) == 6.0  # ours (live) count when the reading is older
    assert rate(ServerLoad(running=0), (0, 2, 1), line=0) == 2.0  # a line's first waiter: one ahead
    assert rate(ServerLoad(running=1, slots=2, kv_used=KV_FULL), (1, 0, 0)) == 1.0  # KV full: held back
    # a server that queues runs all it can: its running requests are its capacity, not the slot limit
    assert rate(ServerLoad(running=12, waiting=2), (1, 0, 0), slots=64) == 0.5  # (14 + 1 − 12) × 2 s / 12
    assert rate(ServerLoad(running=12, waiting=0), (1, 0, 0), slots=64) == 0.0


def test_kv_use_breaks_ties_as_vram_does() -> None:
    _, low = rate_server(ServerLoad(kv_used=0.1), (1, 0, 0), 4, 2.0, None, WEIGHTS, 0.0, 0.0)
    _, high = rate_server(ServerLoad(kv_used=0.8), (1, 0, 0), 4, 2.0, None, WEIGHTS, 0.0, 0.0)
    assert sum(low) - sum(high) == pytest.approx(30.0 * 0.7)


CONFIG = """\
version: 1
server: {{default_alias: t/chat, alias_namespace: t/}}
providers:
  local:
    kind: openai
    probe: false
    workers:
      - {{name: plain, url: "{plain}", max_concurrent: 4}}
      - {{name: vllm1, url: "{vllm}", server: vllm, max_concurrent: 4}}
      - {{name: sglang1, url: "{sglang}", server: sglang, max_concurrent: 4}}
      - {{name: llama1, url: "{llama}", server: llama.cpp, max_concurrent: 4}}
aliases:
  t/chat: {{description: four servers, chain: [local/m]}}
"""
HI = {"model": "t/chat", "messages": [{"role": "user", "content": "hi"}]}


def test_worker_choice_follows_each_servers_own_load_read_in_the_probe_round(
    plan_data: Callable[[str], dict[str, Any]],
) -> None:
    gate = threading.Event()
    with (
        FakeOpenAI(name="vllm", server="vllm") as v,
        FakeOpenAI(name="sglang", server="sglang") as s,
        FakeOpenAI(name="llama", server="llama.cpp") as ll,
        FakeOpenAI(name="plain") as plain,
    ):
        urls = {"vllm": v.base_url, "sglang": s.base_url, "llama": ll.base_url, "plain": plain.base_url}
        plain.set_fault(Fault.hold(gate))  # busy with what this gateway sent it (its own view)
        v.reported.running, v.reported.waiting = 4, 6  # busy with other clients' requests
        s.reported.running, s.reported.kv_used = 4, 0.97
        ll.reported.slots, ll.reported.running = 4, 1  # one of its four slots busy: the least loaded
        gateway = build_gateway(build(plan_data(CONFIG.format(**urls))), probes=False)

        async def scenario() -> list[str]:
            await gateway.startup()
            chosen = []
            try:
                transport = httpx.ASGITransport(app=gateway)
                async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as http:
                    held = [asyncio.create_task(http.post("/v1/chat/completions", json=HI))]
                    for _ in range(2000):  # a failure bound, not a speed
                        if plain.in_flight == 1:  # the first request: nothing read yet, the plan's order
                            break
                        await asyncio.sleep(0.005)
                    await gateway.parts.loops.probes.probe_all()
                    for _ in range(2):
                        answer = await http.post("/v1/chat/completions", json=HI)
                        chosen.append(answer.headers.get("x-interlock-worker", answer.text))
                    ll.reported.running, ll.reported.waiting = 4, 3  # now the busiest
                    s.reported.running, s.reported.kv_used = 0, 0.1  # and this one idle
                    await gateway.parts.loops.probes.probe_all()
                    answer = await http.post("/v1/chat/completions", json=HI)
                    chosen.append(answer.headers.get("x-interlock-worker", answer.text))
                    health = (await http.get("/v1/health")).json()["workers"]
                    chosen.append(str(health["sglang1"]["server"]))
                    chosen.append(str(health["plain"].get("server")))
                    gate.set()
                    await asyncio.gather(*held)
            finally:
                await gateway.shutdown()
            return chosen

        chosen = asyncio.run(scenario())
    assert chosen == [
        "llama1",
        "llama1",
        "sglang1",
        str(
            {
                "kind": "sglang",
                "load": ServerLoad(0, 0, None, 0.1, 0).report(),
                "progress": {"working": False, "moved_s_ago": None, "stall_allowance_s": 120.0},
                "slot_window": None,  # SGLang says no slot's window
            }
        ),
        "None",
    ]


def test_a_server_that_stops_answering_is_unknown_not_idle(
    plan_data: Callable[[str], dict[str, Any]], tmp_path: Path
) -> None:
    with FakeOpenAI(name="vllm", server="vllm") as v, FakeOpenAI(name="plain") as plain:
        lines = CONFIG.splitlines(keepends=True)
        kept = [line for line in lines if "sglang1" not in line and "llama1" not in line]
        config = "".join(kept).format(vllm=v.base_url, plain=plain.base_url)
        gateway = build_gateway(build(plan_data(config)), probes=False)
        v.reported.running = 3

        async def scenario() -> tuple[ServerLoad | None, ServerLoad | None]:
            await gateway.startup()
            try:
                await gateway.parts.loops.probes.probe_all()
                first = gateway.parts.live.fleet.facts.load("local@vllm1")
                v.refuse_connections()
                await gateway.parts.loops.probes.probe_all()
                return first, gateway.parts.live.fleet.facts.load("local@vllm1")
            finally:
                await gateway.shutdown()

        first, later = asyncio.run(scenario())
    assert first is not None
    assert first.running == 3
    assert later is None


def test_explain_and_the_plan_say_which_workers_load_is_read(tmp_path: Path) -> None:
    from interlock.compiler import compile_config
    from interlock.compiler.explain import explain

    (tmp_path / "c.yaml").write_text(
        "version: 1\nproviders:\n  llama:\n    kind: openai\n    workers:\n"
        '      - {name: l1, url: "http://10.0.0.6:8080/v1", server: llama.cpp}\n'
        '      - {name: l2, url: "http://10.0.0.7:8000/v1"}\n'
        "aliases:\n  local: {chain: [llama/m]}\n"
    )
    ctx = compile_config(str(tmp_path / "c.yaml"))
    assert ctx.plan is not None
    assert ctx.plan.workers["l1"].server == "llama.cpp"
    assert "server" not in ctx.plan.workers["l2"].model_dump(mode="json")  # unset: not written at all
    lines = explain(ctx, "local").splitlines()
    at = next(i for i, line in enumerate(lines) if "worker l1 " in line)
    assert lines[at + 1].strip() == "load signals read each probe round from it: server llama.cpp"
    assert "load signals" not in lines[at + 2]
