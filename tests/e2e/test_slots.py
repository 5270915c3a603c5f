"""Slots: per-model limits and a bounded queue (429 + Retry-After past it); a slot comes back however a
request ends: success, error, the client giving up while waiting, and a client leaving mid-stream."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from interlock.testing.faults import Fault
from tests.e2e.conftest import Fakes
from tests.e2e.harness import Served, wait_until

HI = [{"role": "user", "content": "hi"}]


def chat(
    gateway: Served, model: str, *, timeout: float = 10, http: httpx.Client | None = None
) -> httpx.Response:
    """One chat request; pass ``http`` (made beforehand) where the request must go out at once: making a
    client (its TLS context) took longer than a 0.8 s hold on a busy machine."""
    if http is not None:
        return http.post("/v1/chat/completions", json={"model": model, "messages": HI})
    with httpx.Client(base_url=gateway.url, timeout=timeout) as client:
        return client.post("/v1/chat/completions", json={"model": model, "messages": HI})


def worker(gateway: Served, name: str) -> dict[str, Any]:
    report: dict[str, Any] = gateway.health()["workers"][name]
    return report


def idle(gateway: Served, name: str) -> bool:
    report = worker(gateway, name)
    return report["slots_in_use"] == 0 and report["queue_waiting"] == 0


def test_a_full_queue_answers_429_with_retry_after(gateway: Served, fakes: Fakes) -> None:
    fakes.box.set_fault(Fault.slow_first_byte(0.8), model="gemma3:12b", times=2)
    with ThreadPoolExecutor(2) as pool, httpx.Client(base_url=gateway.url, timeout=10) as http:
        running = pool.submit(chat, gateway, "e2e/slots")
        wait_until(lambda: worker(gateway, "box1")["slots_in_use"] == 1, 5, "the first to hold the slot")
        queued = pool.submit(chat, gateway, "e2e/slots", http=http)
        wait_until(lambda: worker(gateway, "box1")["queue_waiting"] == 1, 5, "the second to queue")
        third = chat(gateway, "e2e/slots", http=http)
        assert third.status_code == 429
        assert third.headers["retry-after"] == "3"
        assert third.json()["error"] == {
            "message": "worker box1 has no free slot for gemma3:12b and its queue is full (1 waiting)",
            "type": "rate_limit_error",
            "param": None,
            "code": "slots_busy",
        }
        assert [running.result().status_code, queued.result().status_code] == [200, 200]
    assert queued.result().headers["x-interlock-resolved"] == "box/gemma3:12b"  # it waited, it did not spill
    assert gateway.metric("interlock_slot_rejected_total", worker="box1") == 1
    assert idle(gateway, "box1")


def test_waiting_past_max_wait_answers_429(gateway: Served, fakes: Fakes) -> None:
    fakes.tight.set_fault(Fault.slow_first_byte(0.8), model="llama3.2:3b", times=1)
    with ThreadPoolExecutor(1) as pool, httpx.Client(base_url=gateway.url, timeout=10) as http:
        holder = pool.submit(chat, gateway, "tight/llama3.2:3b")
        wait_until(lambda: worker(gateway, "tight1")["slots_in_use"] == 1, 5, "the holder to take the slot")
        late = chat(gateway, "tight/t-late", http=http)
        assert late.status_code == 429
        assert late.headers["retry-after"] == "1"
        assert (
            late.json()["error"]["message"]
            == "worker tight1 had no free slot for t-late within 0.3s (0 waiting)"
        )
        assert holder.result().status_code == 200
    assert idle(gateway, "tight1")


def test_a_slot_comes_back_after_an_upstream_error(gateway: Served, fakes: Fakes) -> None:
    fakes.tight.set_fault(Fault.http_status(500, "boom"), model="t-err")
    assert chat(gateway, "tight/t-err").status_code == 503
    assert idle(gateway, "tight1")


def test_a_slot_comes_back_when_the_client_gives_up_while_the_upstream_thinks(
    gateway: Served, fakes: Fakes
) -> None:
    fakes.tight.set_fault(Fault.hang(), model="t-hang")
    before = gateway.metric("interlock_client_disconnects_total", endpoint="chat")
    with pytest.raises(httpx.ReadTimeout):
        chat(gateway, "tight/t-hang", timeout=0.3)
    wait_until(lambda: idle(gateway, "tight1"), 1.0, "the slot to come back")  # the upstream still hangs
    assert gateway.metric("interlock_client_disconnects_total", endpoint="chat") == before + 1


def test_a_queue_place_comes_back_when_the_waiting_client_gives_up(gateway: Served, fakes: Fakes) -> None:
    fakes.tight.set_fault(Fault.hang(), model="t-hold")
    with ThreadPoolExecutor(1) as pool:
        holder = pool.submit(chat, gateway, "tight/t-hold", timeout=1.5)
        wait_until(lambda: worker(gateway, "tight1")["slots_in_use"] == 1, 1.0, "the holder to take the slot")
        with pytest.raises(httpx.ReadTimeout):
            chat(gateway, "tight/t-queued", timeout=0.1)
        wait_until(lambda: worker(gateway, "tight1")["queue_waiting"] == 0, 1.0, "the queue to empty")
        assert worker(gateway, "tight1")["slots_in_use"] == 1
        with pytest.raises(httpx.ReadTimeout):
            holder.result()
    wait_until(lambda: idle(gateway, "tight1"), 1.0, "the holder's slot to come back")


def test_a_slot_comes_back_when_the_client_leaves_mid_stream(gateway: Served, fakes: Fakes) -> None:
    body = {"model": "e2e/slowstream", "messages": HI, "stream": True}
    with (
        httpx.Client(base_url=gateway.url, timeout=10) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
        assert worker(gateway, "slow1")["slots_in_use"] == 1
        # leaving the block closed the connection with the stream far from done (40 chunks, 0.1 s apart)
    wait_until(lambda: idle(gateway, "slow1"), 1.0, "the stream's slot to come back")
