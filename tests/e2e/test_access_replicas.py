"""Caller limits across two `interlock serve` replicas on one real Redis: a tenant's one request in
flight on one replica refuses the next on the other, and frees it when it ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.e2e.harness import Served
from tests.redis_server import RedisServer
from tests.waiting import wait_until

KEY = "team-key-5e0c1d-SECRET"
CONFIG = """\
version: 1
server: {{auth: required}}
providers:
  cloud: {{kind: openai, base_url: "{cloud}/v1", timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}}}
tenants:
  team: {{max_concurrent: 1}}
keys:
  bot: {{tenant: team, key_env: TEAM_KEY}}
aliases:
  r/slow: {{description: slow, chain: [cloud/slow]}}
"""
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeOpenAI, list[Served]]]:
    folder = tmp_path_factory.mktemp("access-replicas")
    redis = RedisServer(folder).start()
    cloud = FakeOpenAI(name="cloud").start()
    config = folder / "interlock.yaml"
    config.write_text(CONFIG.format(cloud=cloud.url))
    replicas: list[Served] = []
    try:
        for n in range(2):
            replicas.append(Served(config, {"TEAM_KEY": KEY}, folder / f"r{n}.log", "--state-url", redis.url))
        yield cloud, replicas
    finally:
        for served in replicas:
            served.stop()
        cloud.stop()
        redis.stop()


def chat(served: Served) -> httpx.Response:
    return httpx.post(
        f"{served.url}/v1/chat/completions",
        json={"model": "r/slow", "messages": HI},
        headers={"authorization": f"Bearer {KEY}"},
        timeout=30,
    )


def chats(cloud: FakeOpenAI) -> int:
    return sum(1 for r in cloud.requests if r.path.endswith("/chat/completions"))  # probes aside


def test_a_tenants_concurrency_holds_across_replicas(pair: tuple[FakeOpenAI, list[Served]]) -> None:
    cloud, (first, second) = pair
    gate = threading.Event()  # the first request is held upstream until the other replica has refused
    cloud.set_fault(Fault.hold(gate), model="slow", times=1)
    cloud.clear_requests()
    with ThreadPoolExecutor(1) as pool:
        try:
            held = pool.submit(chat, first)
            wait_until(lambda: chats(cloud) == 1, 60, "the first request to reach the upstream")
            refused = chat(second)  # the other replica: the tenant's one slot is taken
        finally:
            gate.set()
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["message"] == (
            "tenant `team` (of key `bot`) may make 1 requests at once, and that is used up; retry in 1 s"
        )
        assert held.result().status_code == 200
    assert chat(second).status_code == 200  # given back when the first ended
