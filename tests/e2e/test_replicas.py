"""Three ``interlock serve`` replicas on one real Redis: one limit across them, a killed replica's slot
back within the lease TTL, a dead box found by one skipped by the others, and Redis stopped mid-load."""

from __future__ import annotations

import itertools
import signal
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest

from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.e2e.harness import Served
from tests.redis_server import RedisServer
from tests.waiting import wait_until

CONFIG = """\
version: 1
server: {{default_alias: r/slow, alias_namespace: r/, direct_models: allow}}
providers:
  gpu:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
    workers:
      - name: gpu1
        url: "{gpu}"
        max_concurrent: 4
        model_concurrency: {{"slow-*": 1, "*": 4}}
        queue: {{max_waiting: 3, max_wait: 2s}}
  deadbox:
    kind: ollama
    probe: false
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
    workers: [{{name: dead1, url: "{dead}"}}]
  cloud:
    kind: openai
    base_url: "{cloud}/v1"
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
health: {{failure_threshold: 1, open_for: 60s, probe_interval: 5s}}
aliases:
  r/slow: {{description: one slot, chain: [gpu/slow-a]}}
  r/dead: {{description: a dead box first, chain: [deadbox/llama3.2:3b, cloud/c-after-dead]}}
"""
HI = [{"role": "user", "content": "hi"}]


@dataclass
class Cluster:
    redis: RedisServer
    gpu: FakeOllama
    dead: FakeOllama
    replicas: list[Served]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("replicas")
    redis = RedisServer(folder).start()
    gpu = FakeOllama(name="gpu", models=(ModelSpec("slow-a"), ModelSpec("slow-hang"))).start()
    dead = FakeOllama(name="dead").start()
    dead.refuse_connections()
    cloud = FakeOpenAI(name="cloud").start()
    config = folder / "interlock.yaml"
    config.write_text(CONFIG.format(gpu=gpu.url, dead=dead.url, cloud=cloud.url))
    url = f"{redis.url}?lease_ttl=1"
    replicas: list[Served] = []
    try:
        for n in range(3):
            replicas.append(Served(config, {}, folder / f"replica{n}.log", "--state-url", url))
        yield Cluster(redis, gpu, dead, replicas)
    finally:
        for served in replicas:
            served.stop()
        for fake in (gpu, dead, cloud):
            fake.stop()
        redis.stop()


def chat(gateway: Served, model: str, *, timeout: float = 30) -> httpx.Response:
    with httpx.Client(base_url=gateway.url, timeout=timeout) as http:
        return http.post("/v1/chat/completions", json={"model": model, "messages": HI})


def in_use(gateway: Served) -> int:
    report: int = gateway.health()["workers"]["gpu1"]["slots_in_use"]
    return report


def test_one_limit_holds_across_three_replicas(cluster: Cluster) -> None:
    assert all(r.health()["slot_state"] == {"scope": "shared", "degraded": False} for r in cluster.replicas)
    gpu = cluster.gpu
    gpu.set_fault(Fault.slow_first_byte(0.3), model="slow-a")
    gpu.clear_requests()
    callers = itertools.cycle(cluster.replicas)
    targets = [next(callers) for _ in range(21)]  # seven callers on each replica
    try:
        with ThreadPoolExecutor(21) as pool:
            answers = list(pool.map(lambda served: chat(served, "r/slow"), targets))
    finally:
        gpu.clear_faults(model="slow-a")
    assert gpu.peak_in_flight == 1
    statuses = sorted(a.status_code for a in answers)
    assert set(statuses) == {200, 429}, statuses
    refused = [a for a in answers if a.status_code == 429]
    assert all(a.headers["retry-after"] == "2" for a in refused)
    assert any("its queue is full (3 waiting)" in a.json()["error"]["message"] for a in refused)
    assert len([r for r in gpu.requests if r.path == "/api/chat"]) == statuses.count(200)
    wait_until(lambda: in_use(cluster.replicas[0]) == 0, 60, "the slots to be free")


def test_a_box_found_dead_by_one_replica_is_skipped_by_the_others(cluster: Cluster) -> None:
    first, second, third = cluster.replicas
    answered = chat(first, "r/dead")
    assert (answered.status_code, answered.headers["x-interlock-resolved"]) == (200, "cloud/c-after-dead")
    assert first.metric("interlock_upstream_errors_total", candidate="deadbox/llama3.2:3b") == 1
    for other in (second, third):
        wait_until(
            lambda other=other: not other.health()["workers"]["dead1"]["healthy"],  # type: ignore[misc]
            60,
            "the news to reach the other replicas",
        )
        again = chat(other, "r/dead")
        assert (again.status_code, again.headers["x-interlock-resolved"]) == (200, "cloud/c-after-dead")
        assert other.metric("interlock_upstream_errors_total", candidate="deadbox/llama3.2:3b") == 0
        skips = [  # skipped for the dead box, or for the candidate's circuit the first replica shared
            other.metric(
                "interlock_fallback_total",
                from_candidate="deadbox/llama3.2:3b",
                to_candidate="cloud/c-after-dead",
                reason=reason,
            )
            for reason in ("unhealthy", "circuit_open")
        ]
        assert sum(skips) == 1


def test_a_killed_replica_frees_its_slot_within_the_lease_ttl(cluster: Cluster) -> None:
    victim, survivor = cluster.replicas[2], cluster.replicas[0]
    cluster.gpu.set_fault(Fault.hang(), model="slow-hang")
    with ThreadPoolExecutor(1) as pool:
        holder: Future[httpx.Response] = pool.submit(chat, victim, "gpu/slow-hang", timeout=60)
        wait_until(lambda: in_use(survivor) == 1, 60, "the request to hold its slot")
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(60)
        assert isinstance(holder.exception(timeout=60), httpx.TransportError)
    wait_until(lambda: in_use(survivor) == 0, 60, "the dead replica's lease to expire (TTL 1 s)")
    cluster.gpu.set_fault(Fault.slow_first_byte(0.1), model="slow-a", times=1)
    assert chat(survivor, "r/slow").status_code == 200


def held_or_queued(gateway: Served) -> int:
    """Requests the shared store holds a slot or a queue place for (the report is read from it)."""
    worker = gateway.health()["workers"]["gpu1"]
    return int(worker["slots_in_use"] + worker["queue_waiting"])


def test_redis_stopped_mid_load_falls_back_to_per_process_limits(cluster: Cluster) -> None:
    alive = [r for r in cluster.replicas if r.proc.poll() is None]
    gpu = cluster.gpu
    gpu.set_fault(Fault.slow_first_byte(0.5), model="slow-a")
    try:
        with ThreadPoolExecutor(12) as pool:
            load = [pool.submit(chat, alive[n % len(alive)], "r/slow", timeout=60) for n in range(12)]

            def decided_by_the_store() -> bool:
                # Every load request answered, holding the slot or queued, and some still there. Stopping
                # Redis before the store saw them all (on a busy machine) sent the rest to the replicas'
                # own tables, where they filled both queues: the later requests then all got 429.
                there = held_or_queued(alive[0])
                return there > 0 and there + sum(f.done() for f in load) == len(load)

            wait_until(decided_by_the_store, 60, "the shared store to decide every load request")
            cluster.redis.stop()
            later = [pool.submit(chat, alive[n % len(alive)], "r/slow", timeout=60) for n in range(6)]
            answers = [f.result() for f in load + later]  # every request ends: none hangs
    finally:
        gpu.clear_faults(model="slow-a")
    assert {a.status_code for a in answers} <= {200, 429}
    assert any(a.status_code == 200 for a in answers[12:])  # served after the store went away
    for served in alive:
        assert served.metric("interlock_state_degraded", scope="shared") == 1
        assert "shared state store unreachable (ConnectionError)" in served.log()
        assert "Traceback" not in served.log()
