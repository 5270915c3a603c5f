"""The simulated GPU box: loads, LRU eviction, a busy model kept, parallelism, truthful /api/ps.

Every test waits on the box's state (``box.until``) or on answers, never on the clock; load and token
times are small only so that the suite stays fast.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest

from interlock.testing.fake_fleet import GIB, BoxEvent, FakeGpuBox, sim_model
from interlock.testing.faults import Fault

A = sim_model("model-a:1b", 2, load_s=0.05, tokens_per_s=1000)
B = sim_model("model-b:1b", 2, load_s=0.05, tokens_per_s=1000)
C = sim_model("model-c:1b", 2, load_s=0.05, tokens_per_s=1000)
WIDE = sim_model("wide:3b", 1, load_s=0.05, tokens_per_s=1000, parallel=2)
HUGE = sim_model("huge:405b", 200)


def run(test: Callable[[FakeGpuBox, aiohttp.ClientSession], Awaitable[None]], **box: Any) -> None:
    async def main() -> None:
        async with FakeGpuBox(name="box", **box) as fake, aiohttp.ClientSession(fake.url) as http:
            await test(fake, http)

    asyncio.run(main())


async def chat(http: aiohttp.ClientSession, model: str, *, stream: bool = True) -> tuple[int, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": "one two three"}], "stream": stream}
    async with http.post("/api/chat", json=body) as response:
        raw = await response.read()
    if response.status != 200:
        return response.status, orjson.loads(raw)
    if not stream:
        return 200, orjson.loads(raw)
    return 200, [orjson.loads(line) for line in raw.splitlines() if line]


async def ps(http: aiohttp.ClientSession) -> list[tuple[str, int]]:
    async with http.get("/api/ps") as response:
        return [(m["name"], m["size_vram"]) for m in (await response.json())["models"]]


def test_a_cold_model_is_loaded_once_and_then_answers_warm() -> None:
    async def test(box: FakeGpuBox, http: aiohttp.ClientSession) -> None:
        assert await ps(http) == []
        status, frames = await chat(http, "model-a:1b")
        assert status == 200
        final = frames[-1]
        assert final["done"] is True
        assert final["load_duration"] == 50_000_000
        tokens = [f for f in frames[:-1] if f["message"]["content"]]
        assert final["eval_count"] == len(tokens)
        assert final["eval_duration"] == pytest.approx(len(tokens) * 1_000_000, rel=1e-6)
        assert await ps(http) == [("model-a:1b", 2 * GIB)]
        status, warm = await chat(http, "model-a:1b", stream=False)
        assert (status, warm["load_duration"]) == (200, 0)
        assert box.loads == 1
        async with http.get("/api/tags") as response:
            installed = sorted(m["name"] for m in (await response.json())["models"])
        assert installed == ["model-a:1b", "model-b:1b", "model-c:1b"]

    run(test, models=[A, B, C], vram_bytes=5 * GIB)


def test_a_load_request_loads_without_a_slot_and_makes_room_as_a_request_would() -> None:
    async def test(box: FakeGpuBox, http: aiohttp.ClientSession) -> None:
        assert (await chat(http, "model-a:1b"))[0] == 200
        assert (await chat(http, "model-b:1b"))[0] == 200
        box.hold()  # generation stops, but a load request generates nothing: it is answered all the same
        async with http.post("/api/generate", json={"model": "model-c:1b", "keep_alive": -1}) as response:
            answer = await response.json(content_type=None)
        assert (response.status, answer["done_reason"], answer["response"]) == (200, "load", "")
        assert box.events[-2:] == [BoxEvent("evict", "model-a:1b"), BoxEvent("load", "model-c:1b")]
        assert box.state["model-c:1b"].served == 0
        assert box.running() == 0
        assert box.wire.keep_alive["model-c:1b"] == -1
        async with http.post("/api/chat", json={"model": "model-b:1b", "messages": []}) as response:
            again = await response.json(content_type=None)
        assert again["done_reason"] == "load"
        assert box.loads == 3  # model-b was loaded: nothing to do
        box.release()
        assert await ps(http) == [("model-b:1b", 2 * GIB), ("model-c:1b", 2 * GIB)]

    run(test, models=[A, B, C], vram_bytes=5 * GIB)


def test_the_least_recently_used_idle_model_is_evicted_when_a_new_one_does_not_fit() -> None:
    async def test(box: FakeGpuBox, http: aiohttp.ClientSession) -> None:
        for model in ("model-a:1b", "model-b:1b", "model-a:1b", "model-c:1b"):
            assert (await chat(http, model))[0] == 200
        assert box.events == [
            BoxEvent("load", "model-a:1b"),
            BoxEvent("load", "model-b:1b"),
            BoxEvent("evict", "model-b:1b"),  # used before the second call of A
            BoxEvent("load", "model-c:1b"),
        ]
        assert await ps(http) == [("model-a:1b", 2 * GIB), ("model-c:1b", 2 * GIB)]
        assert box.vram_in_use() <= box.vram_bytes

    run(test, models=[A, B, C], vram_bytes=5 * GIB)


def test_a_model_serving_requests_is_not_evicted_the_new_one_waits_for_room() -> None:
    async def test(box: FakeGpuBox, http: aiohttp.ClientSession) -> None:
        box.hold()
        first = asyncio.create_task(chat(http, "model-a:1b"))
        await box.until(lambda: box.state["model-a:1b"].loaded and box.state["model-a:1b"].running == 1)
        second = asyncio.create_task(chat(http, "model-b:1b"))
        await box.until(lambda: box.state["model-b:1b"].waiting == 1)
        assert box.loaded() == ["model-a:1b"]
        assert not box.state["model-b:1b"].loading
        box.release()
        assert (await first)[0] == 200
        assert (await second)[0] == 200
        assert [(e.kind, e.model) for e in box.events] == [
            ("load", "model-a:1b"),
            ("evict", "model-a:1b"),
            ("load", "model-b:1b"),
        ]

    run(test, models=[A, B], vram_bytes=3 * GIB)


def test_per_model_parallelism_queues_the_rest_and_a_cold_model_loads_once() -> None:
    async def test(box: FakeGpuBox, http: aiohttp.ClientSession) -> None:
        box.hold()
        calls = [asyncio.create_task(chat(http, "wide:3b")) for _ in range(3)]
        await box.until(lambda: box.state["wide:3b"].running == 2 and box.state["wide:3b"].waiting == 1)
        assert box.loads == 1
        box.release()
        assert [(await c)[0] for c in calls] == [200, 200, 200]
        state = box.state["wide:3b"]
        assert (state.peak_running, state.served, box.loads) == (2, 3, 1)

    run(test, models=[WIDE], vram_bytes=4 * GIB)


def test_what_cannot_be_served_is_refused_like_ollama() -> None:
    async def test(box: FakeGpuBox, http: aiohttp.ClientSession) -> None:
        assert await chat(http, "huge:405b") == (
            500,
            {"error": "model requires more system memory (200.0 GiB) than is available (4.0 GiB)"},
        )
        assert await chat(http, "absent:1b") == (
            404,
            {"error": 'model "absent:1b" not found, try pulling it first'},
        )
        assert box.loads == 0

    run(test, models=[A, HUGE], vram_bytes=4 * GIB)


def test_faults_still_apply() -> None:
    async def test(box: FakeGpuBox, http: aiohttp.ClientSession) -> None:
        box.set_fault(Fault.http_status(503, "overloaded"), times=1)
        assert (await chat(http, "model-a:1b"))[0] == 503
        assert (await chat(http, "model-a:1b"))[0] == 200
        assert box.loads == 1

    run(test, models=[A], vram_bytes=4 * GIB)


def test_a_client_that_leaves_gives_its_slot_back() -> None:
    async def test(box: FakeGpuBox, http: aiohttp.ClientSession) -> None:
        box.hold()
        call = asyncio.create_task(chat(http, "model-a:1b"))
        await box.until(lambda: box.state["model-a:1b"].running == 1)
        call.cancel()
        box.release()  # the box notices the client is gone when it writes (as the fakes' server does)
        await box.until(lambda: box.state["model-a:1b"].running == 0)
        assert (await chat(http, "model-a:1b"))[0] == 200

    run(test, models=[A], vram_bytes=4 * GIB)


def test_requests_computing_at_once_share_the_gpu_whatever_their_model() -> None:
    async def test(box: FakeGpuBox, http: aiohttp.ClientSession) -> None:
        box.preload("model-a:1b", "model-b:1b")
        status, frames = await chat(http, "model-a:1b")
        assert status == 200
        solo = frames[-1]
        tokens = solo["eval_count"]
        assert solo["eval_duration"] == pytest.approx(tokens * 1_000_000, rel=1e-6)  # alone: full speed
        box.hold()
        calls = [asyncio.create_task(chat(http, m)) for m in ("model-a:1b", "model-b:1b")]
        await box.until(lambda: box.running() == 2 and box.computing == 0)  # both held after the prompt
        box.release()
        shared = [(await c)[1][-1] for c in calls]
        assert box.peak_computing == 2
        assert box.computing == 0
        # each token but at most the first and last was made beside the other request: twice as long
        for final in shared:
            assert final["eval_duration"] >= (2 * tokens - 2) * 1_000_000
        assert box.loads == 0

    run(test, models=[A, B], vram_bytes=5 * GIB)
