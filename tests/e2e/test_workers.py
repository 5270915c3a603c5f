"""``--workers N``: limits hold across the processes (one slot file, the supervisor's queue), a worker that
dies gives its slots back, and replacements load the plan the supervisor accepted last (not the file)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.e2e.harness import Served
from tests.waiting import wait_until

CONFIG = """\
version: 1
server: {{default_alias: w/slow, alias_namespace: w/, direct_models: allow}}
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
  llama:  # an OpenAI-compatible server listed as a worker: the same slots (issue 22)
    kind: openai
    probe: false
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
    workers:
      - {{name: llama1, url: "{llama}/v1", max_concurrent: 1, queue: {{max_waiting: 3, max_wait: 2s}}}}
aliases:
  w/slow: {{description: one slot, chain: [gpu/slow-a]}}
  w/llama: {{description: one slot on a llama.cpp box, chain: [llama/smollm2]}}
"""


def other(gpu: FakeOllama) -> str:
    """A sound plan, different from CONFIG's: its one alias is ``w/other``."""
    return CONFIG.format(gpu=gpu.url, llama="http://127.0.0.1:9").replace("w/slow", "w/other")


HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def gpu() -> Iterator[FakeOllama]:
    with FakeOllama(name="gpu", models=(ModelSpec("slow-a"), ModelSpec("slow-hang"))) as fake:
        yield fake


@pytest.fixture(scope="module")
def llama() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(name="llama") as fake:
        yield fake


@pytest.fixture(scope="module")
def served(gpu: FakeOllama, llama: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("workers")
    config = folder / "interlock.yaml"
    config.write_text(CONFIG.format(gpu=gpu.url, llama=llama.url))
    gateway = Served(config, {}, folder / "serve.log", "--workers", "4")
    try:
        yield gateway
    finally:
        gateway.stop()


def chat(gateway: Served, model: str, *, timeout: float = 30) -> httpx.Response:
    with httpx.Client(base_url=gateway.url, timeout=timeout) as http:
        return http.post("/v1/chat/completions", json={"model": model, "messages": HI})


def in_use(gateway: Served) -> int:
    report: int = gateway.health()["workers"]["gpu1"]["slots_in_use"]
    return report


def workers_of(gateway: Served) -> list[int]:
    """The worker processes of ``gateway`` (children of the supervisor started by multiprocessing)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        state = stat.rsplit(")", 1)[1].split()[0]
        if parent == gateway.proc.pid and b"spawn_main" in cmdline and state != "Z":
            found.append(int(entry))
    return sorted(found)


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_one_slot_holds_across_four_processes(served: Served, gpu: FakeOllama) -> None:
    assert served.banner.endswith("4 processes)")
    assert served.health()["slot_state"] == {"scope": "host", "degraded": False}
    gpu.set_fault(Fault.slow_first_byte(0.3), model="slow-a")
    gpu.clear_requests()
    try:
        with ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(lambda _: chat(served, "w/slow"), range(20)))
    finally:
        gpu.clear_faults(model="slow-a")
    assert gpu.peak_in_flight == 1
    statuses = sorted(a.status_code for a in answers)
    assert set(statuses) == {200, 429}, statuses
    refused = [a for a in answers if a.status_code == 429]
    assert all(a.headers["retry-after"] == "2" for a in refused)
    assert all(a.json()["error"]["code"] == "slots_busy" for a in refused)
    assert any("its queue is full (3 waiting)" in a.json()["error"]["message"] for a in refused)
    chats = [r for r in gpu.requests if r.path == "/api/chat"]
    assert len(chats) == statuses.count(200)  # nothing refused reached the upstream
    wait_until(lambda: in_use(served) == 0, 60, "the slots to be free")


def test_an_openai_servers_one_slot_holds_across_four_processes(served: Served, llama: FakeOpenAI) -> None:
    llama.set_fault(Fault.slow_first_byte(0.3), model="smollm2")
    try:
        with ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(lambda _: chat(served, "w/llama"), range(20)))
    finally:
        llama.clear_faults(model="smollm2")
    assert llama.peak_in_flight == 1
    statuses = sorted(a.status_code for a in answers)
    assert set(statuses) == {200, 429}, statuses
    refused = [a for a in answers if a.status_code == 429]
    assert all(a.headers["retry-after"] == "2" for a in refused)
    assert all(a.json()["error"]["code"] == "slots_busy" for a in refused)
    assert {a.headers["x-interlock-worker"] for a in answers if a.status_code == 200} == {"llama1"}


def test_a_killed_worker_gives_its_slot_back(served: Served, gpu: FakeOllama) -> None:
    gpu.set_fault(Fault.hang(), model="slow-hang")
    with ThreadPoolExecutor(1) as pool:
        holder: Future[httpx.Response] = pool.submit(chat, served, "gpu/slow-hang", timeout=60)
        wait_until(lambda: in_use(served) == 1, 60, "the request to hold its slot")
        for pid in workers_of(served):  # the holder is the one whose client connection breaks
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda pid=pid: gone(pid), 60, f"worker {pid} to die")  # type: ignore[misc]
            try:
                holder.exception(timeout=1.0)
            except TimeoutError:
                continue
            break
        assert isinstance(holder.exception(), httpx.TransportError)
    # the slot server freed it when the dead process's row lock went; no request is needed to notice
    wait_until(lambda: in_use(served) == 0, 60, "the dead worker's slot to come back")
    gpu.set_fault(Fault.slow_first_byte(0.1), model="slow-a", times=1)
    assert chat(served, "w/slow").status_code == 200
    wait_until(lambda: len(workers_of(served)) == 4, 30, "the replacements to start")
    assert "Traceback" not in served.log()


def test_replacements_load_the_accepted_plan_not_the_file(served: Served, gpu: FakeOllama) -> None:
    serving = chat(served, "w/slow").headers["x-interlock-plan"]
    config = served.plan
    config.write_text("version: 1\nproviders: [not, a, mapping]\n")
    served.sighup()
    wait_until(lambda: "plan reload refused; the workers keep serving" in served.log(), 60, "the refusal")
    first = workers_of(served)[0]
    os.kill(first, signal.SIGKILL)  # its replacement must not read the refused file
    wait_until(lambda: first not in workers_of(served) and len(workers_of(served)) == 4, 30, "a replacement")
    config.write_text(other(gpu))  # sound, but not accepted: no SIGHUP
    second = workers_of(served)[0]
    os.kill(second, signal.SIGKILL)  # nor this one the new file
    wait_until(lambda: second not in workers_of(served) and len(workers_of(served)) == 4, 30, "a replacement")
    wait_until(lambda: served._ready(), 30, "the gateway to be ready")
    hashes = {chat(served, "w/slow").headers["x-interlock-plan"] for _ in range(12)}
    assert hashes == {serving}
    served.sighup()  # now accepted: every worker moves to it
    wait_until(lambda: "plan accepted for the workers" in served.log(), 60, "the new plan")

    def all_moved() -> bool:
        return all(chat(served, "w/other").status_code == 200 for _ in range(12))

    wait_until(all_moved, 60, "every worker to serve the new plan")
    assert "Traceback" not in served.log()
