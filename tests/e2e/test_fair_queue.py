"""Fair queuing end to end, where the queue is shared: `interlock serve --workers 2` (the supervisor's
slot table) and two replicas on one real Redis, in front of a fake Ollama worker with one slot, called
with caller keys of three tenants (each request to the next process or replica in turn). The fake holds
every request until the test opens its gate, so the queue is built first and then drained: the order
the fake receives the requests in is the order the queue handed out the slot. Every wait is on state."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.faults import Fault
from tests.e2e.harness import Served
from tests.redis_server import RedisServer
from tests.waiting import wait_until

CONFIG = """\
version: 1
server: {{auth: required}}
providers:
  gpu:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 60s, total: 120s}}
    workers:
      - {{name: gpu1, url: "{gpu}", max_concurrent: 1, queue: {{max_waiting: 32, max_wait: 60s}}}}
tenants:
  flood: {{}}
  quiet: {{}}
  lab: {{}}
keys:
  flooder: {{tenant: flood, key_env: FLOOD_KEY}}
  quiet: {{tenant: quiet, key_env: QUIET_KEY}}
  notebook: {{tenant: lab, key_env: LAB_KEY, priority_header: true, operator: true}}
aliases:
  f/chat: {{chain: [gpu/slow-a], on_saturation: queue}}
"""
KEYS = {"flooder": "flood-3c1f-SECRET", "quiet": "quiet-8e2a-SECRET", "notebook": "lab-51d0-9f3e-SECRET"}
ENV = {"FLOOD_KEY": KEYS["flooder"], "QUIET_KEY": KEYS["quiet"], "LAB_KEY": KEYS["notebook"]}


@pytest.fixture(scope="module")
def gpu() -> Iterator[FakeOllama]:
    with FakeOllama(name="gpu", models=(ModelSpec("slow-a"),)) as fake:
        yield fake


@pytest.fixture(scope="module", params=["workers", "redis"])
def served(
    request: pytest.FixtureRequest, gpu: FakeOllama, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Served]]:
    """The gateways that share one queue: one `--workers 2`, or two replicas on one Redis."""
    folder: Path = tmp_path_factory.mktemp("fair")
    config = folder / "interlock.yaml"
    config.write_text(CONFIG.format(gpu=gpu.url))
    gateways: list[Served] = []
    redis = RedisServer(folder).start() if request.param == "redis" else None
    try:
        if redis is None:
            gateways.append(Served(config, ENV, folder / "serve.log", "--workers", "2"))
        else:
            for n in range(2):
                gateways.append(Served(config, ENV, folder / f"r{n}.log", "--state-url", redis.url))
        yield gateways
    finally:
        for gateway in gateways:
            gateway.stop()
        if redis is not None:
            redis.stop()


def chat(gateway: Served, key: str, text: str, priority: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEYS[key]}"}
    if priority is not None:
        headers["X-Interlock-Priority"] = priority
    with httpx.Client(base_url=gateway.url, timeout=120) as http:
        body = {"model": "f/chat", "messages": [{"role": "user", "content": text}]}
        return http.post("/v1/chat/completions", json=body, headers=headers)


def waiting(gateway: Served) -> int:
    headers = {"Authorization": f"Bearer {KEYS['notebook']}"}
    found: int = gateway.http.get("/v1/health", headers=headers).json()["workers"]["gpu1"]["queue_waiting"]
    return found


def received(gpu: FakeOllama) -> list[str]:
    return [r.body["messages"][0]["content"] for r in gpu.requests if r.path == "/api/chat"]


def test_a_quiet_tenant_is_not_queued_behind_a_flooder_and_batch_goes_last(
    served: list[Served], gpu: FakeOllama
) -> None:
    gate = threading.Event()
    gpu.clear_requests()
    gpu.set_fault(Fault.hold(gate), model="slow-a")
    arrivals = [("flooder", f"f{i}", None) for i in range(6)]
    arrivals += [("notebook", "b0", "batch"), ("quiet", "q0", None), ("quiet", "q1", None)]
    try:
        with ThreadPoolExecutor(len(arrivals) + 1) as pool:
            answers: list[Future[httpx.Response]] = [pool.submit(chat, served[0], "flooder", "first")]
            wait_until(lambda: received(gpu) == ["first"], what="the first request to hold the slot")
            for count, (key, text, priority) in enumerate(arrivals, 1):
                answers.append(pool.submit(chat, served[count % len(served)], key, text, priority))
                wait_until(lambda count=count: waiting(served[0]) == count, what=f"{text} to queue")
            gate.set()
            statuses = [answer.result().status_code for answer in answers]
    finally:
        gate.set()
        gpu.clear_faults(model="slow-a")
    assert statuses == [200] * len(answers)
    order = received(gpu)[1:]
    # equal tags of two tenants: by arrival in the supervisor's table, either way in Redis
    assert [set(order[0:2]), set(order[2:4])] == [{"f0", "q0"}, {"f1", "q1"}]
    assert order[4:] == ["f2", "f3", "f4", "f5", "b0"]


def test_a_priority_header_is_read_only_where_the_key_may_send_it(served: list[Served]) -> None:
    refused = chat(served[-1], "notebook", "hi", priority="urgent")
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "`X-Interlock-Priority` is `urgent`; send `interactive` or `batch`"
    )
    assert chat(served[-1], "quiet", "hi", priority="urgent").status_code == 200  # not this key's to choose
