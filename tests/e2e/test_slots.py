"""Slots: per-model limits and a bounded queue (429 + Retry-After past it); a slot comes back however a
request ends: success, error, the client giving up while waiting, and a client leaving mid-stream.

Every hold is decided by the test: a held upstream answers when the test opens its gate
(``Fault.hold``), and a client gives up when the test closes its socket, once the gateway shows the
request holding a slot or waiting. Nothing races a delay, except the one queue wait under test
(tight1's 300 ms). The upstream timeouts of box, tight and slowbox are far longer than ``RELEASED_S``,
so a slot that comes back within it came back because the client left, not because a timeout fired.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import orjson

from interlock.testing.faults import Fault
from tests.e2e.conftest import Fakes
from tests.e2e.harness import Served
from tests.waiting import PATIENCE_S, wait_until

HI = [{"role": "user", "content": "hi"}]
RELEASED_S = 30  # a slot freed by a leaving client comes back within this; the upstream timeouts are longer


def chat(
    gateway: Served, model: str, *, timeout: float = 60, http: httpx.Client | None = None
) -> httpx.Response:
    """One chat request; pass ``http`` (made beforehand) to reuse a client (making one, its TLS context,
    takes a while on a busy machine)."""
    if http is not None:
        return http.post("/v1/chat/completions", json={"model": model, "messages": HI})
    with httpx.Client(base_url=gateway.url, timeout=timeout) as client:
        return client.post("/v1/chat/completions", json={"model": model, "messages": HI})


@contextmanager
def abandoned(gateway: Served, model: str) -> Iterator[None]:
    """A chat request whose client gives up (closes its connection, answer unread) on leaving the block."""
    host, port = gateway.url.removeprefix("http://").rsplit(":", 1)
    body = orjson.dumps({"model": model, "messages": HI})
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        yield


@contextmanager
def held(fake: Any, model: str, times: int) -> Iterator[threading.Event]:
    """The next ``times`` requests for ``model`` wait until the gate is set (at the latest on leaving)."""
    gate = threading.Event()
    fake.set_fault(Fault.hold(gate), model=model, times=times)
    try:
        yield gate
    finally:
        gate.set()
        fake.clear_faults(model=model)


def worker(gateway: Served, name: str) -> dict[str, Any]:
    report: dict[str, Any] = gateway.health()["workers"][name]
    return report


def idle(gateway: Served, name: str) -> bool:
    report = worker(gateway, name)
    return report["slots_in_use"] == 0 and report["queue_waiting"] == 0


def test_a_full_queue_answers_429_with_retry_after(gateway: Served, fakes: Fakes) -> None:
    with (
        held(fakes.box, "gemma3:12b", times=2) as gate,
        ThreadPoolExecutor(2) as pool,
        httpx.Client(base_url=gateway.url, timeout=60) as http,
    ):
        running = pool.submit(chat, gateway, "e2e/slots")
        wait_until(
            lambda: worker(gateway, "box1")["slots_in_use"] == 1, PATIENCE_S, "the first to hold the slot"
        )
        queued = pool.submit(chat, gateway, "e2e/slots", http=http)
        wait_until(lambda: worker(gateway, "box1")["queue_waiting"] == 1, PATIENCE_S, "the second to queue")
        third = chat(gateway, "e2e/slots", http=http)
        assert third.status_code == 429
        assert third.headers["retry-after"] == "60"  # box1's max_wait
        assert third.json()["error"] == {
            "message": "worker box1 has no free slot for gemma3:12b and its queue is full (1 waiting)",
            "type": "rate_limit_error",
            "param": None,
            "code": "slots_busy",
        }
        gate.set()
        assert [running.result().status_code, queued.result().status_code] == [200, 200]
    assert queued.result().headers["x-interlock-resolved"] == "box/gemma3:12b"  # it waited, it did not spill
    assert gateway.metric("interlock_slot_rejected_total", worker="box1") == 1
    assert idle(gateway, "box1")


def test_waiting_past_max_wait_answers_429(gateway: Served, fakes: Fakes) -> None:
    with (
        held(fakes.tight, "llama3.2:3b", times=1) as gate,
        ThreadPoolExecutor(1) as pool,
        httpx.Client(base_url=gateway.url, timeout=60) as http,
    ):
        holder = pool.submit(chat, gateway, "tight/llama3.2:3b")
        wait_until(
            lambda: worker(gateway, "tight1")["slots_in_use"] == 1, PATIENCE_S, "the holder to take the slot"
        )
        late = chat(gateway, "tight/t-late", http=http)  # the slot stays held however long this takes
        assert late.status_code == 429
        assert late.headers["retry-after"] == "1"
        assert (
            late.json()["error"]["message"]
            == "worker tight1 had no free slot for t-late within 0.3s (0 waiting)"
        )
        gate.set()
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
    with abandoned(gateway, "tight/t-hang"):
        wait_until(
            lambda: worker(gateway, "tight1")["slots_in_use"] == 1, PATIENCE_S, "the request to take the slot"
        )
    wait_until(
        lambda: idle(gateway, "tight1"), RELEASED_S, "the slot to come back"
    )  # the upstream still hangs
    wait_until(
        lambda: gateway.metric("interlock_client_disconnects_total", endpoint="chat") == before + 1,
        PATIENCE_S,
        "the disconnect to be counted",
    )


def test_a_queue_place_comes_back_when_the_waiting_client_gives_up(gateway: Served, fakes: Fakes) -> None:
    with held(fakes.box, "gemma3:12b", times=1) as gate, ThreadPoolExecutor(1) as pool:
        holder = pool.submit(chat, gateway, "e2e/slots")
        wait_until(
            lambda: worker(gateway, "box1")["slots_in_use"] == 1, PATIENCE_S, "the holder to take the slot"
        )
        with abandoned(gateway, "e2e/slots"):
            wait_until(
                lambda: worker(gateway, "box1")["queue_waiting"] == 1, PATIENCE_S, "the second to queue"
            )
        # box1's queue wait is 60 s: an empty queue within RELEASED_S is the client's leaving
        wait_until(lambda: worker(gateway, "box1")["queue_waiting"] == 0, RELEASED_S, "the queue to empty")
        assert worker(gateway, "box1")["slots_in_use"] == 1  # the holder is still held
        gate.set()
        assert holder.result().status_code == 200
    wait_until(lambda: idle(gateway, "box1"), PATIENCE_S, "the holder's slot to come back")


def test_a_slot_comes_back_when_the_client_leaves_mid_stream(gateway: Served, fakes: Fakes) -> None:
    body = {"model": "e2e/slowstream", "messages": HI, "stream": True}
    finished, cut = fakes.slow.streams.finished, fakes.slow.streams.cut
    with (
        httpx.Client(base_url=gateway.url, timeout=60) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
        assert worker(gateway, "slow1")["slots_in_use"] == 1
        # leaving the block closes the connection with the stream far from done (600 chunks, 0.1 s apart)
    wait_until(lambda: idle(gateway, "slow1"), RELEASED_S, "the stream's slot to come back")
    wait_until(lambda: fakes.slow.streams.cut == cut + 1, PATIENCE_S, "the upstream stream to be closed")
    assert fakes.slow.streams.finished == finished
