"""Prefix affinity end to end: `interlock serve` (a real process) in front of simulated GPU boxes with a
prefix cache (``FakeGpuBox(prefix_cache_tokens=...)``), called with the real `openai` SDK."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from interlock.testing.fake_fleet import GIB, FakeGpuBox, sim_model
from tests.runtime.fleet.test_serve import MODEL, REPLY, Fleet, fleets, loaded_on
from tests.waiting import wait_until

__all__ = ["fleets"]  # the fixture, shared with test_serve

SYSTEM = "You answer questions about the shop's orders, politely and briefly. " * 30


def cached_box(name: str) -> FakeGpuBox:
    model = sim_model(MODEL, 6.0, load_s=0.05, tokens_per_s=400.0, parallel=1)
    box = FakeGpuBox(name=name, models=[model], vram_bytes=24 * GIB, reply=REPLY, prefix_cache_tokens=100_000)
    box.preload(MODEL)
    return box


def test_the_next_turn_of_a_conversation_goes_where_its_prefix_is_cached(
    tmp_path: Path, fleets: list[Fleet]
) -> None:
    boxes = {name: cached_box(name) for name in ("first", "second", "third")}
    # only slots, queues and the prefix count here (no speed, VRAM, utilisation): else plan order
    fleet = Fleet(tmp_path, boxes, "{weights: {speed: 0, vram: 0, gpu_util: 0}}")
    fleets.append(fleet)
    wait_until(lambda: all(loaded_on(fleet, name) for name in boxes), 60, "/api/ps")
    client = fleet.client()

    def turn(*contents: str) -> str:
        messages: Any = [{"role": "system", "content": SYSTEM}]
        messages += [
            {"role": "user" if i % 2 == 0 else "assistant", "content": c} for i, c in enumerate(contents)
        ]
        raw = client.chat.completions.with_raw_response.create(model="t/queue", messages=messages)
        return str(raw.headers["x-interlock-worker"])

    boxes["first"].hold()  # `first` busy: the conversation starts on `second`
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(turn, "keeps first busy")
        wait_until(lambda: fleet.worker("first")["slots_in_use"] == 1, 60, "first to be busy")
        assert turn("where is my order?") == "second"
        boxes["first"].release()
        assert busy.result() == "first"
    wait_until(lambda: fleet.worker("first")["slots_in_use"] == 0, 60, "first to be idle")
    # all idle with the model loaded: plan order would say `first`; `second` holds both prefixes, and
    # the conversation's next turn shares more of its prefix there (the system prompt and turn 1)
    assert turn("where is my order?", "It left on Monday.", "and the invoice?") == "second"
    assert boxes["second"].cached_tokens > len(SYSTEM.split())  # the box's own count: a real hit
    assert fleet.worker("second")["score"]["prefix_s"] > fleet.worker("third")["score"]["prefix_s"] == 0.0
    report = fleet.served.health()["prefix_affinity"]
    assert report["hits"] >= 1
    assert report["prefill_tokens_per_s"]  # learned from the boxes' prompt timings
    assert "shop's orders" not in str(report)


def test_a_cached_prefix_costs_what_llama_server_measured() -> None:
    """Calibrated on the real server (SmolLM2-135M, one thread): 4,219 prompt tokens cold at 93 tokens/s,
    then the same prompt plus a short turn with 4,212 of them cached: 0.15 ms a cached token. The box
    reports its own prompt time (``prompt_eval_duration``), sped up 1000x here."""
    import asyncio

    import httpx

    model = sim_model(MODEL, 0.2, prompt_tokens_per_s=93_000.0, cached_token_s=0.148e-6, tokens_per_s=1e5)
    box = FakeGpuBox(name="llama", models=[model], vram_bytes=GIB, reply=REPLY, prefix_cache_tokens=10_000)
    box.preload(MODEL)
    system = {"role": "system", "content": " ".join(["w"] * 4_212)}

    async def durations() -> list[float]:
        await box.astart()
        out = []
        try:
            async with httpx.AsyncClient(timeout=30) as http:
                for turn in ("a b c d e f g", "a b c d e f g h"):  # 7 words, then 8: the first 4,212 cached
                    body = {
                        "model": MODEL,
                        "messages": [system, {"role": "user", "content": turn}],
                        "stream": False,
                    }
                    answer = (await http.post(f"{box.url}/api/chat", json=body)).json()
                    out.append(answer["prompt_eval_duration"] / 1e9)
        finally:
            await box.aclose()
        return out

    cold, warm = asyncio.run(durations())
    assert cold == pytest.approx(4_219 / 93_000.0, rel=0.01)  # 45.4 ms: 45.4 s at real speed
    assert warm == pytest.approx(4_212 * 0.148e-6 + 8 / 93_000.0, rel=0.01)  # 0.71 ms: 0.71 s real
    assert box.cached_tokens == 4_212
