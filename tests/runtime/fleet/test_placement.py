"""Placement at runtime: a gateway in process in front of fake Ollama workers (real HTTP on loopback).

Rounds are run directly (``probe_all``, ``warm_all``), never waited for: the loops are off
(``probes=False``), so what a round did is all there is to see. The probe timeout (the deadline of
/api/tags and /api/ps too) is far longer than a loaded machine keeps a loopback fake waiting, so every
round sees the fakes as they are (at 900 ms, a round on a busy 2-core machine missed a restart).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.app.gateway import Gateway
from interlock.runtime.base.clock import Clock
from interlock.runtime.fleet.placement import HALF_LIFE_S, MAX_WARM_HOLD_S, traffic_class
from interlock.testing.fake_fleet import FakeGpuBox, sim_model
from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.faults import Fault
from tests.runtime.conftest import build

GIB = 1024**3
MODELS = (
    ModelSpec("qwen3:8b", ("completion", "tools"), size=6 * GIB),
    ModelSpec("gemma3:12b", ("completion", "vision"), size=9 * GIB, family="gemma3"),
    ModelSpec("nomic-embed-text", ("embedding",), size=GIB // 4, family="nomic-bert"),
)
CONFIG = """\
version: 1
server: {{alias_namespace: t/}}
health: {{probe_interval: 1m, probe_timeout: 30s}}
routing:
  placement: {{warm: {warm}, keep_alive: {keep_alive}}}
models:
{models}
providers:
  local:
    kind: ollama
    workers:
      - {{name: a, url: "{a}", memory_gib: {memory}, default_context_tokens: 8192}}
      - {{name: b, url: "{b}", memory_gib: {memory}, default_context_tokens: 8192}}
aliases:
  t/chat: {{chain: [local/qwen3:8b, local/gemma3:12b]}}
  t/vision: {{chain: [local/gemma3:12b]}}
{extra}"""
SIZES = "  local/qwen3:8b: {size_gib: 6}\n  local/gemma3:12b: {size_gib: 9}"


@pytest.fixture
def workers() -> Iterator[tuple[FakeOllama, FakeOllama]]:
    with FakeOllama(name="a", models=MODELS) as a, FakeOllama(name="b", models=MODELS) as b:
        yield a, b


def gateway(
    plan_data: Callable[[str], dict[str, Any]],
    a: FakeOllama,
    b: FakeOllama,
    *,
    warm: bool = True,
    keep_alive: str = "forever",
    memory: float = 16,
    models: str = SIZES,
    extra: str = "",
    clock: Clock = time.monotonic,
) -> Gateway:
    text = CONFIG.format(
        warm=str(warm).lower(),
        keep_alive=keep_alive,
        memory=memory,
        models=models or "  {}",
        a=a.url,
        b=b.url,
        extra=extra,
    )
    return build_gateway(build(plan_data(text)), probes=False, clock=clock)


def run(gw: Gateway, scenario: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        await gw.startup()
        try:
            transport = httpx.ASGITransport(app=gw)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                return await scenario(http)
        finally:
            await gw.shutdown()

    return asyncio.run(main())


async def rounds(gw: Gateway, count: int = 1) -> None:
    """``count`` times: a probe round (/api/ps, /api/tags), then a warm-up round."""
    for _ in range(count):
        await gw.parts.loops.probes.probe_all()
        await gw.parts.live.fleet.warmer.warm_all()


def loads(fake: FakeOllama) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests if r.path == "/api/generate"]


def test_placed_models_are_warmed_with_the_plans_keep_alive_and_num_ctx(
    plan_data: Callable[[str], dict[str, Any]], workers: tuple[FakeOllama, FakeOllama]
) -> None:
    a, b = workers
    gw = gateway(plan_data, a, b)

    async def scenario(http: httpx.AsyncClient) -> Any:
        await rounds(gw, 2)
        return (await http.get("/v1/health")).json()["placement"]

    placement = run(gw, scenario)
    # 16 GiB x 90% = 14.4 each; gemma3 (9 GiB, first in two aliases) ranks first and takes a (the tie
    # goes to the first name), qwen3 (6) does not fit beside it and takes b; neither fits a second home
    assert {w: [h["model"] for h in homes] for w, homes in placement["homes"].items()} == {
        "a": ["gemma3:12b"],
        "b": ["qwen3:8b"],
    }
    assert placement["budgets_gib"] == {"a": 14.4, "b": 14.4}
    assert list(a.loaded()) == ["gemma3:12b"]
    assert list(b.loaded()) == ["qwen3:8b"]
    for fake in (a, b):
        for body in loads(fake):
            assert body["keep_alive"] == -1
            assert body["options"] == {"num_ctx": 8192}  # what a request there would send: no reload
            assert "prompt" not in body
            assert body["stream"] is False
    states = {h["state"] for homes in placement["homes"].values() for h in homes}
    assert states == {"loaded"}  # the second round's /api/ps lists them
    assert sum(len(loads(fake)) for fake in (a, b)) == sum(len(h) for h in placement["homes"].values())


def test_the_compiled_homes_are_what_the_runtime_keeps_without_traffic(
    plan_data: Callable[[str], dict[str, Any]], workers: tuple[FakeOllama, FakeOllama]
) -> None:
    a, b = workers
    data = plan_data(
        CONFIG.format(warm="true", keep_alive="30m", memory=16, models=SIZES, a=a.url, b=b.url, extra="")
    )
    compiled = data["placement"]["homes"]
    gw = build_gateway(build(data), probes=False)

    async def scenario(http: httpx.AsyncClient) -> Any:
        await rounds(gw)
        return (await http.get("/v1/health")).json()["placement"]

    placement = run(gw, scenario)
    assert {w: [h["candidate"] for h in homes] for w, homes in placement["homes"].items()} == compiled
    assert compiled == {"a": ["local/gemma3:12b"], "b": ["local/qwen3:8b"]}
    assert all(
        h["compiled"] and h["size_source"] == "declared" for hs in placement["homes"].values() for h in hs
    )
    assert {body["keep_alive"] for fake in (a, b) for body in loads(fake)} == {1800}


def test_a_restarted_worker_is_warmed_again(
    plan_data: Callable[[str], dict[str, Any]], workers: tuple[FakeOllama, FakeOllama]
) -> None:
    a, b = workers
    gw = gateway(plan_data, a, b)

    async def scenario(http: httpx.AsyncClient) -> Any:
        await rounds(gw, 2)
        before = len(loads(a))
        await asyncio.to_thread(a.stop)
        await rounds(gw)  # the worker is down: nothing to warm, and it is said
        down = (await http.get("/v1/health")).json()["placement"]["homes"]["a"]
        restarted = FakeOllama(name="a", models=MODELS, port=a.port)  # a fresh Ollama: nothing loaded
        await asyncio.to_thread(restarted.start)
        try:
            await rounds(gw, 2)
            after = (await http.get("/v1/health")).json()["placement"]["homes"]["a"]
            return before, down, after, restarted.loaded(), loads(restarted)
        finally:
            await asyncio.to_thread(restarted.stop)

    before, down, after, loaded, again = run(gw, scenario)
    assert before >= 1
    assert {h["state"] for h in down} == {"worker down"}
    assert loaded == {"gemma3:12b": 8192}
    assert [h["model"] for h in after] == ["gemma3:12b"]
    assert len(again) == 1  # loaded once, not once a round
    assert {h["state"] for h in after} == {"loaded"}


def test_requests_to_a_home_are_pinned_unless_the_caller_says(
    plan_data: Callable[[str], dict[str, Any]], workers: tuple[FakeOllama, FakeOllama]
) -> None:
    """Ollama resets a model's timer on every request that names no keep_alive: the gateway names the
    plan's on a home (OpenAI surface and relayed Ollama requests alike); a caller's own passes."""
    a, b = workers
    gw = gateway(plan_data, a, b, keep_alive="24h")
    hi = [{"role": "user", "content": "hi"}]

    async def scenario(http: httpx.AsyncClient) -> Any:
        await rounds(gw, 2)
        seen = []
        for path, extra in (
            ("/v1/chat/completions", {}),
            ("/api/chat", {"stream": False}),
            ("/api/chat", {"stream": False, "keep_alive": "5m"}),
        ):
            answer = await http.post(path, json={"model": "t/vision", "messages": hi, **extra})
            assert answer.status_code == 200, answer.text
            seen.append((answer.headers["x-interlock-worker"], a.keep_alive.get("gemma3:12b")))
        return seen

    assert run(gw, scenario) == [("a", 86400), ("a", 86400), ("a", "5m")]


def test_with_warm_up_off_nothing_is_loaded_or_pinned(
    plan_data: Callable[[str], dict[str, Any]], workers: tuple[FakeOllama, FakeOllama]
) -> None:
    a, b = workers
    gw = gateway(plan_data, a, b, warm=False)

    async def scenario(http: httpx.AsyncClient) -> Any:
        await rounds(gw, 2)
        hi = [{"role": "user", "content": "hi"}]
        await http.post("/v1/chat/completions", json={"model": "t/chat", "messages": hi})
        return (await http.get("/v1/health")).json()["placement"]

    placement = run(gw, scenario)
    assert loads(a) == loads(b) == []
    assert a.keep_alive.get("qwen3:8b") is None
    assert b.keep_alive.get("qwen3:8b") is None
    assert placement["warm"] is False  # computed and shown all the same
    assert {w: [h["model"] for h in hs] for w, hs in placement["homes"].items()} == {
        "a": ["gemma3:12b"],
        "b": ["qwen3:8b"],
    }
    assert {h["state"] for hs in placement["homes"].values() for h in hs} == {"cold"}


def test_undeclared_sizes_are_taken_from_what_the_workers_report(
    plan_data: Callable[[str], dict[str, Any]], workers: tuple[FakeOllama, FakeOllama]
) -> None:
    a, b = workers
    gw = gateway(plan_data, a, b, models="", extra="  t/embed: {chain: [local/nomic-embed-text]}\n")
    assert gw.plan.placement.homes == {"a": (), "b": ()}  # nothing declared: nothing compiled

    async def scenario(http: httpx.AsyncClient) -> Any:
        await rounds(gw, 2)  # the first probe round reads /api/tags sizes; the warm-up packs with them
        return (await http.get("/v1/health")).json()["placement"]

    placement = run(gw, scenario)
    homes = placement["homes"]
    # /api/tags sizes: gemma3 9, nomic 0.25, qwen3 6 GiB; ranked gemma3, nomic (first in one alias,
    # name before qwen3), qwen3; nomic fits beside either, so it gets a home on both
    assert {w: [h["model"] for h in hs] for w, hs in homes.items()} == {
        "a": ["gemma3:12b", "nomic-embed-text"],
        "b": ["nomic-embed-text", "qwen3:8b"],
    }
    assert {h["size_source"] for hs in homes.values() for h in hs} == {"reported"}
    assert [h["footprint_gib"] for h in homes["b"]] == [0.25, 6.0]
    # the embedding model has a home (it is small) but is not warmed: /api/generate refuses it
    embed = [h for hs in homes.values() for h in hs if h["model"] == "nomic-embed-text"]
    assert embed
    assert {h["state"] for h in embed} == {"loads on first use"}
    assert all(body["model"] != "nomic-embed-text" for fake in (a, b) for body in loads(fake))


def test_a_failed_load_is_reported_counted_and_tried_again_later(
    plan_data: Callable[[str], dict[str, Any]], workers: tuple[FakeOllama, FakeOllama]
) -> None:
    a, b = workers
    gw = gateway(plan_data, a, b)

    async def scenario(http: httpx.AsyncClient) -> Any:
        await gw.parts.loops.probes.probe_all()
        a.set_fault(Fault.http_status(500, "out of memory"), model="gemma3:12b", times=1)
        await gw.parts.live.fleet.warmer.warm_all()
        failed = (await http.get("/v1/health")).json()["placement"]["homes"]["a"]
        await rounds(gw, 2)
        healed = (await http.get("/v1/health")).json()["placement"]["homes"]["a"]
        return failed, healed, gw.parts.live.metrics.exposition().decode()

    failed, healed, metrics = run(gw, scenario)
    assert [(h["model"], h["state"]) for h in failed] == [("gemma3:12b", "failed (server_error)")]
    assert [(h["model"], h["state"]) for h in healed] == [("gemma3:12b", "loaded")]
    assert 'interlock_warmups_total{endpoint="local@a",result="server_error"} 1.0' in metrics
    assert 'interlock_warmups_total{endpoint="local@a",result="ok"}' in metrics


ONE = """\
version: 1
server: {{alias_namespace: t/}}
models:
  local/qwen3:8b: {{size_gib: 6}}
  local/gemma3:12b: {{size_gib: 9}}
providers:
  local:
    kind: ollama
    workers:
      - {{name: a, url: "{a}", memory_gib: 10}}
aliases:
  t/fast: {{chain: [local/qwen3:8b]}}
  t/vision: {{chain: [local/gemma3:12b]}}
  t/chat: {{chain: [local/gemma3:12b, local/qwen3:8b]}}
"""


@pytest.mark.parametrize("fast_per_hour", [60, 1])
def test_a_model_used_every_minute_outranks_one_used_daily(
    plan_data: Callable[[str], dict[str, Any]], workers: tuple[FakeOllama, FakeOllama], fast_per_hour: int
) -> None:
    """Room for one model (9 GiB): the plan ranks gemma3 first (first in two aliases). gemma3 answers
    one request, then qwen3 answers ``fast_per_hour`` over the next hour: one a minute moves qwen3
    ahead; one, about as much traffic as gemma3's, leaves the plan's order."""
    a, _ = workers
    now = [0.0]
    gw = build_gateway(build(plan_data(ONE.format(a=a.url))), probes=False, clock=lambda: now[0])
    hi = [{"role": "user", "content": "hi"}]

    async def scenario(http: httpx.AsyncClient) -> Any:
        gw.parts.live.fleet.placement.refresh(gw.plan)
        first = [h.candidate for h in gw.parts.live.fleet.placement.homes["a"]]
        await http.post("/v1/chat/completions", json={"model": "t/vision", "messages": hi})
        for minute in range(60):
            now[0] += 60
            if minute % (60 // fast_per_hour) == 0:
                await http.post("/v1/chat/completions", json={"model": "t/fast", "messages": hi})
            if minute % 10 == 9:
                gw.parts.live.fleet.placement.refresh(gw.plan)
        return (
            first,
            [h.candidate for h in gw.parts.live.fleet.placement.homes["a"]],
            dict(gw.parts.live.fleet.placement.traffic),
        )

    first, last, traffic = run(gw, scenario)
    assert first == ["local/gemma3:12b"]
    expected = "local/qwen3:8b" if fast_per_hour == 60 else "local/gemma3:12b"
    assert last == [expected], traffic


def test_traffic_classes_are_orders_of_magnitude() -> None:
    assert traffic_class(0) == 0
    assert traffic_class(1) == 1  # about one request in the last hour
    assert traffic_class(60 / 0.693) == 6  # one a minute, halving hourly: the steady count
    assert traffic_class(-3) == 0
    assert HALF_LIFE_S == 3600.0


TELEMETRY = """\
version: 1
routing:
  placement: {{warm: true}}
models:
  local/qwen3:8b: {{size_gib: 6}}
providers:
  local:
    kind: ollama
    workers:
      - {{name: gpu, url: "{url}", telemetry: {{url: "{url}/telemetry"}}}}
aliases:
  chat: {{chain: [local/qwen3:8b]}}
"""


def test_a_worker_of_unknown_memory_is_placed_once_its_telemetry_says(
    plan_data: Callable[[str], dict[str, Any]],
) -> None:
    """No memory in the plan (IL214 at compile time); the box's sidecar reports 8 GiB of VRAM: 7.2 GiB of
    it is placement's, qwen3 (6 GiB) gets its home there and is warmed."""
    with FakeGpuBox(name="gpu", models=[sim_model("qwen3:8b", 6, load_s=0.01)], vram_bytes=8 * GIB) as box:
        gw = build_gateway(build(plan_data(TELEMETRY.format(url=box.url))), probes=False)
        assert gw.plan.placement.budgets_gib == {}

        async def scenario(http: httpx.AsyncClient) -> Any:
            await gw.parts.live.fleet.warmer.warm_all()
            before = (await http.get("/v1/health")).json()["placement"]
            await gw.parts.live.fleet.telemetry_loop.collect_all()
            await rounds(gw, 2)
            return before, (await http.get("/v1/health")).json()["placement"]

        before, after = run(gw, scenario)
    assert before["homes"] == {}
    assert (after["budgets_gib"], after["budget_sources"]) == ({"gpu": 7.2}, {"gpu": "telemetry"})
    assert [(h["model"], h["state"]) for h in after["homes"]["gpu"]] == [("qwen3:8b", "loaded")]
    assert box.loads == 1


def test_a_home_that_worker_choice_evicted_is_not_loaded_back(
    plan_data: Callable[[str], dict[str, Any]], workers: tuple[FakeOllama, FakeOllama]
) -> None:
    """Warm-up loads at start and after a restart only: once the worker serves, its loads are worker
    choice's, and loading an evicted home back would evict what those requests needed."""
    a, b = workers
    gw = gateway(plan_data, a, b)
    hi = [{"role": "user", "content": "hi"}]

    async def scenario(http: httpx.AsyncClient) -> Any:
        await rounds(gw, 2)
        async with httpx.AsyncClient(base_url=a.url) as direct:  # Ollama evicts gemma3 for qwen3 on a
            await direct.post("/api/chat", json={"model": "qwen3:8b", "messages": hi, "stream": False})
            await direct.post("/api/generate", json={"model": "gemma3:12b", "keep_alive": 0})
        await rounds(gw, 2)
        return (await http.get("/v1/health")).json()["placement"]["homes"]["a"]

    homes = run(gw, scenario)
    assert [(h["model"], h["state"]) for h in homes] == [("gemma3:12b", "not loaded")]
    assert len(loads(a)) == 2  # the warm-up's, and the unload above: nothing after
    assert list(a.loaded()) == ["qwen3:8b"]


@pytest.mark.parametrize("restarts", [False, True])
def test_a_worker_that_flaps_every_round_is_loaded_a_bounded_number_of_times(
    plan_data: Callable[[str], dict[str, Any]], workers: tuple[FakeOllama, FakeOllama], restarts: bool
) -> None:
    """Twenty flaps, one a second (the gateway's clock is injected: the warmer compares its loads'
    times with /api/ps's, so both read it): the worker refuses connections,
    then answers again, either as it was (its models still loaded: nothing to load) or restarted empty.
    A crash-looping worker was loaded once a restart (21 loads); its warm-ups now back off (probe_interval
    x 2, x 4, ...), each restart within the hold starting a longer one: the start's load and the first
    restart's, then none while it flaps. Once it stays up past its hold, its home is loaded again."""
    a, b = workers
    now = [1000.0]
    gw = gateway(plan_data, a, b, clock=lambda: now[0])

    async def tick() -> None:
        now[0] += 1.0
        await rounds(gw)

    async def scenario(http: httpx.AsyncClient) -> Any:
        await rounds(gw, 2)
        fake = a
        for _ in range(20):
            await asyncio.to_thread(fake.stop if restarts else fake.refuse_connections)
            await tick()
            if restarts:  # a fresh Ollama on the same port: nothing loaded
                fake = FakeOllama(name="a", models=MODELS, port=a.port)
                fake._recorded = a._recorded  # one record of every load, whichever process took it
                await asyncio.to_thread(fake.start)
            else:
                await asyncio.to_thread(fake.accept_connections)
            await tick()
        flapping = len(loads(a))
        held = (await http.get("/v1/health")).json()["placement"]["homes"]["a"]
        now[0] += MAX_WARM_HOLD_S  # it stays up: the longest hold runs out
        await rounds(gw, 2)
        settled = (await http.get("/v1/health")).json()["placement"]["homes"]["a"]
        if restarts:
            await asyncio.to_thread(fake.stop)
        return flapping, held, settled

    flapping, held, settled = run(gw, scenario)
    if not restarts:
        assert flapping == 1  # the start's: the model stayed loaded through every flap
        assert [h["state"] for h in held] == ["loaded"]
    else:
        assert flapping == 2, flapping  # the start's and the first restart's
        assert [h["state"] for h in held] == ["held back (the worker restarted 20 times in a row)"]
    assert [h["state"] for h in settled] == ["loaded"]
