"""Worker choice end to end: `interlock serve` (a real process) in front of simulated GPU boxes
(``FakeGpuBox``) and a fake cloud, called with the real `openai` SDK. Every wait is on state."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import openai
import pytest

from interlock.testing.fake_fleet import GIB, FakeGpuBox, SimModel, sim_model
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.replies import Reply
from tests.e2e.harness import Served, compile_to
from tests.waiting import wait_until

MODEL = "qwen3:8b"
REPLY = Reply(text=" ".join(f"w{i}" for i in range(12)))

CONFIG = """\
version: 1
server: {{alias_namespace: t/}}
providers:
  local:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
    workers:
{workers}
  cloud: {{kind: openai, base_url: "{cloud}", api_key_env: CLOUD_KEY}}
health: {{probe_interval: 1s, probe_timeout: 900ms}}
routing: {routing}
aliases:
  t/chat: {{chain: [local/{model}, cloud/c1]}}
  t/queue: {{chain: [local/{model}, cloud/c1], on_saturation: queue}}
  t/after: {{chain: [local/{model}, cloud/c1], on_saturation: queue, fallback_after: 200ms}}
  t/patient: {{chain: [local/{model}, cloud/c1], on_saturation: queue, fallback_after: 60s}}
"""


def box(name: str, *, tokens_per_s: float = 400.0, extra: tuple[SimModel, ...] = ()) -> FakeGpuBox:
    models = [sim_model(MODEL, 6.0, load_s=0.05, tokens_per_s=tokens_per_s, parallel=1), *extra]
    return FakeGpuBox(name=name, models=models, vram_bytes=24 * GIB, reply=REPLY)


class Fleet:
    """The boxes (in plan order), the cloud and the gateway in front of them."""

    def __init__(self, tmp: Path, boxes: dict[str, FakeGpuBox], routing: str = "{}", *args: str) -> None:
        self.tmp, self.boxes, self.routing, self.args = tmp, boxes, routing, args
        self.stack = ExitStack()
        for fake in boxes.values():
            self.stack.enter_context(fake)
        self.cloud = self.stack.enter_context(FakeOpenAI(name="cloud", api_key="sk-cloud"))
        workers = "\n".join(
            f'      - {{name: {name}, url: "{fake.url}", max_concurrent: 1, '
            f'telemetry: {{url: "{fake.url}/telemetry"}}}}'
            for name, fake in boxes.items()
        )
        text = CONFIG.format(workers=workers, cloud=self.cloud.base_url, routing=routing, model=MODEL)
        self.plan = compile_to(tmp / "c.yaml", text, tmp / "plan.json")
        self.served = self.start()

    def start(self) -> Served:
        return Served(self.plan, {"CLOUD_KEY": "sk-cloud"}, self.tmp / "serve.log", *self.args)

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.served.url}/v1", api_key="unused", max_retries=0)

    def ask(self, alias: str = "t/chat", content: str = "hello") -> Any:
        """The raw response: headers (worker, candidate) and the parsed completion."""
        messages: Any = [{"role": "user", "content": content}]
        return self.client().chat.completions.with_raw_response.create(model=alias, messages=messages)

    def worker(self, name: str) -> Any:
        return self.served.health()["workers"][name]

    def facts(self, name: str) -> Any:
        return self.served.http.get("/v1/metadata").json()["workers"].get(f"local@{name}", {})

    def close(self) -> None:
        self.served.stop()
        self.stack.close()


@pytest.fixture
def fleets(tmp_path: Path) -> Iterator[list[Fleet]]:
    made: list[Fleet] = []
    yield made
    for fleet in made:
        fleet.close()


def loaded_on(fleet: Fleet, name: str) -> bool:
    return MODEL in (fleet.facts(name).get("loaded") or {})


def test_the_worker_with_the_model_loaded_wins_over_an_idle_one_that_would_load_it(
    tmp_path: Path, fleets: list[Fleet]
) -> None:
    cold, warm = box("cold"), box("warm")
    warm.preload(MODEL)
    fleet = Fleet(tmp_path, {"cold": cold, "warm": warm})  # `cold` is first in plan order
    fleets.append(fleet)
    wait_until(lambda: loaded_on(fleet, "warm") and fleet.facts("cold").get("loaded") == {}, 60, "/api/ps")
    answer = fleet.ask()
    assert answer.headers["x-interlock-worker"] == "warm"
    assert answer.headers["x-interlock-resolved"] == f"local/{MODEL}"
    assert (cold.loads, warm.loads) == (0, 0)
    score = fleet.worker("warm")["score"]
    assert score["model"] == MODEL
    assert score["parts"]["loaded"] == 100.0
    assert fleet.worker("cold")["score"]["parts"]["loaded"] == 0.0


def test_with_the_model_loaded_on_both_the_faster_worker_is_preferred(
    tmp_path: Path, fleets: list[Fleet]
) -> None:
    slow, fast = box("slow", tokens_per_s=100.0), box("fast", tokens_per_s=2000.0)
    slow.preload(MODEL)
    fast.preload(MODEL)
    fleet = Fleet(tmp_path, {"slow": slow, "fast": fast})
    fleets.append(fleet)
    wait_until(lambda: loaded_on(fleet, "slow") and loaded_on(fleet, "fast"), 60, "/api/ps")
    slow.hold()  # the first request stays on `slow` (plan order): the second must go to `fast`
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(fleet.ask, "t/queue")
        wait_until(lambda: fleet.worker("slow")["slots_in_use"] == 1, 60, "the first to hold slow's slot")
        second = fleet.ask("t/queue")
        slow.release()
        assert first.result().headers["x-interlock-worker"] == "slow"
    assert second.headers["x-interlock-worker"] == "fast"
    wait_until(
        lambda: all(fleet.worker(n)["learned_tokens_per_s"].get(MODEL) for n in ("slow", "fast")),
        60,
        "both speeds to be learned",
    )
    learned = {n: fleet.worker(n)["learned_tokens_per_s"][MODEL]["tokens_per_s"] for n in ("slow", "fast")}
    assert learned["fast"] > learned["slow"]
    for _ in range(3):
        assert fleet.ask().headers["x-interlock-worker"] == "fast"
    parts = fleet.worker("fast")["score"]["parts"]
    assert parts["speed"] > fleet.worker("slow")["score"]["parts"]["speed"]


def test_above_avoid_vram_percent_a_worker_is_not_asked_to_load_while_another_can_serve(
    tmp_path: Path, fleets: list[Fleet]
) -> None:
    filler = sim_model("big:70b", 20.0, load_s=0.05)
    full, roomy = box("full", extra=(filler,)), box("roomy", extra=(filler,))
    full.preload("big:70b")  # 20 of 24 GiB: 83% in use
    # VRAM pressure as a soft part is off here: only the hard penalty can move the request
    fleet = Fleet(tmp_path, {"full": full, "roomy": roomy}, "{avoid_vram_percent: 80, weights: {vram: 0}}")
    fleets.append(fleet)
    wait_until(lambda: "telemetry" in fleet.worker("full") and _vram(fleet, "full"), 60, "telemetry")
    wait_until(lambda: "telemetry" in fleet.worker("roomy") and _vram(fleet, "roomy"), 60, "telemetry")
    answer = fleet.ask()
    assert answer.headers["x-interlock-worker"] == "roomy"
    assert (full.loads, roomy.loads) == (0, 1)
    assert fleet.worker("full")["score"]["parts"]["avoid_load"] == -1000.0
    assert fleet.worker("roomy")["score"]["parts"]["avoid_load"] == 0.0


def _vram(fleet: Fleet, name: str) -> bool:
    gpus = fleet.worker(name)["telemetry"].get("gpus") or fleet.worker(name)["telemetry"]
    return bool(gpus)


def test_a_saturated_worker_spills_to_the_cloud_at_once_under_fallback_and_queues_under_queue(
    tmp_path: Path, fleets: list[Fleet]
) -> None:
    only = box("only")
    only.preload(MODEL)
    fleet = Fleet(tmp_path, {"only": only})
    fleets.append(fleet)
    only.hold()
    with ThreadPoolExecutor(2) as pool:
        holder = pool.submit(fleet.ask, "t/chat")
        wait_until(lambda: fleet.worker("only")["slots_in_use"] == 1, 60, "the holder to take the slot")
        spilled = fleet.ask("t/chat")  # answered while the holder still holds the only slot
        assert spilled.headers["x-interlock-resolved"] == "cloud/c1"
        assert "x-interlock-worker" not in spilled.headers
        assert fleet.worker("only")["slots_in_use"] == 1
        queued = pool.submit(fleet.ask, "t/queue")
        wait_until(lambda: fleet.worker("only")["queue_waiting"] == 1, 60, "the t/queue request to wait")
        only.release()
        assert holder.result().headers["x-interlock-worker"] == "only"
        assert queued.result().headers["x-interlock-worker"] == "only"
    labels = {"from_candidate": f"local/{MODEL}", "to_candidate": "cloud/c1", "reason": "saturated"}
    assert fleet.served.metric("interlock_fallback_total", **labels) == 1


def test_learned_speeds_survive_a_restart(tmp_path: Path, fleets: list[Fleet]) -> None:
    only = box("only", tokens_per_s=800.0)
    only.preload(MODEL)
    state = tmp_path / "state"
    fleet = Fleet(tmp_path, {"only": only}, "{}", "--state-dir", str(state))
    fleets.append(fleet)
    assert fleet.worker("only")["learned_tokens_per_s"] == {}
    fleet.ask()
    wait_until(lambda: bool(fleet.worker("only")["learned_tokens_per_s"]), 60, "a learned speed")
    before = fleet.worker("only")["learned_tokens_per_s"][MODEL]
    fleet.served.stop()  # SIGTERM: the shutdown writes the state file
    assert (state / "speeds.json").is_file()
    fleet.served = fleet.start()
    assert fleet.worker("only")["learned_tokens_per_s"][MODEL] == before


def test_sticky_sessions_keep_a_conversation_on_one_worker_and_repin_when_it_dies(
    tmp_path: Path, fleets: list[Fleet]
) -> None:
    first, second = box("first"), box("second")
    first.preload(MODEL)
    second.preload(MODEL)
    # only slots and queues count here (no speed, VRAM, utilisation): unpinned, plan order decides
    routing = "{sticky: {enabled: true}, weights: {speed: 0, vram: 0, gpu_util: 0}}"
    fleet = Fleet(tmp_path, {"first": first, "second": second}, routing)
    fleets.append(fleet)
    wait_until(lambda: loaded_on(fleet, "first") and loaded_on(fleet, "second"), 60, "/api/ps")
    client = fleet.client()

    def turn(session: str | None, *contents: str) -> str:
        messages: Any = [{"role": "user", "content": c} for c in contents]
        headers = {"X-Session-ID": session} if session else {}
        raw = client.chat.completions.with_raw_response.create(
            model="t/queue", messages=messages, extra_headers=headers
        )
        return str(raw.headers["x-interlock-worker"])

    first.hold()  # `first` busy: both sessions start on `second`
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(turn, None, "keeps first busy")
        wait_until(lambda: fleet.worker("first")["slots_in_use"] == 1, 60, "first to be busy")
        assert turn("abc", "turn 1") == "second"
        assert turn(None, "a long story", "turn 1") == "second"  # named by its messages
        first.release()
        assert busy.result() == "first"
    wait_until(lambda: fleet.worker("first")["slots_in_use"] == 0, 60, "first to be idle")
    assert turn("other", "a new session") == "first"  # plan order wins without a pin
    for _ in range(2):  # both idle, `first` first in plan order: the pins hold
        assert turn("abc", "turn 2") == "second"
        assert turn(None, "a long story", "turn 1", "turn 2") == "second"
    second.stop()
    wait_until(lambda: not fleet.worker("second")["healthy"], 60, "second to be seen down")
    assert turn("abc", "turn 3") == "first"  # repinned
    report = fleet.served.health()["sticky_sessions"]
    assert report["repinned"] == 1
    assert report["sessions"] == 4  # abc, other, and two named by their messages
    assert "abc" not in (tmp_path / "serve.log").read_text()


def test_fallback_after_queues_until_the_expected_wait_exceeds_it(
    tmp_path: Path, fleets: list[Fleet]
) -> None:
    only = box("only", tokens_per_s=20.0)  # 12 tokens: about 0.6 s a request
    only.preload(MODEL)
    fleet = Fleet(tmp_path, {"only": only})
    fleets.append(fleet)
    fleet.ask("t/after")  # not learned yet: it would queue; free now, so it runs and teaches
    wait_until(lambda: bool(fleet.worker("only")["learned_tokens_per_s"]), 60, "a learned service time")
    service = fleet.worker("only")["learned_tokens_per_s"][MODEL]["service_s"]
    assert 0.2 < service < 10
    only.hold()
    with ThreadPoolExecutor(2) as pool:
        holder = pool.submit(fleet.ask, "t/queue")
        wait_until(lambda: fleet.worker("only")["slots_in_use"] == 1, 60, "the holder to take the slot")
        spilled = fleet.ask("t/after")  # expected wait ~0.6 s > 200ms: the cloud, at once
        assert spilled.headers["x-interlock-resolved"] == "cloud/c1"
        patient = pool.submit(fleet.ask, "t/patient")  # ~0.6 s < 60 s: it queues
        wait_until(lambda: fleet.worker("only")["queue_waiting"] == 1, 60, "t/patient to wait")
        only.release()
        assert holder.result().headers["x-interlock-worker"] == "only"
        assert patient.result().headers["x-interlock-worker"] == "only"
    labels = {"from_candidate": f"local/{MODEL}", "to_candidate": "cloud/c1", "reason": "expected_wait"}
    assert fleet.served.metric("interlock_fallback_total", **labels) == 1


def line(fleet: Fleet) -> int:
    """Requests of the local candidate waiting in the fleet line (for any of its workers)."""
    waiting: dict[str, int] = fleet.served.health()["slot_state"].get("fleet_waiting", {})
    return waiting.get(f"local/{MODEL}", 0)


def test_a_line_longer_than_a_load_sends_the_next_request_to_load_the_model_elsewhere(
    tmp_path: Path, fleets: list[Fleet]
) -> None:
    """Time-aware choice: requests wait in the fleet line for the worker with the model loaded while
    (waiters ahead + 1) x the learned service time stays under the expected load time elsewhere; the
    first waiter past it takes the idle worker's slot and loads the model there."""
    warm = box("warm", tokens_per_s=6.0)  # 12 tokens: 2 s a request
    cold = box("cold")
    warm.preload(MODEL)
    fleet = Fleet(tmp_path, {"warm": warm, "cold": cold})
    fleets.append(fleet)
    wait_until(lambda: loaded_on(fleet, "warm") and fleet.facts("cold").get("loaded") == {}, 60, "/api/ps")
    assert fleet.ask("t/queue").headers["x-interlock-worker"] == "warm"  # teaches the service time
    wait_until(lambda: bool(fleet.worker("warm")["learned_tokens_per_s"]), 60, "a learned service time")
    warm.hold()
    with ThreadPoolExecutor(4) as pool:
        holder = pool.submit(fleet.ask, "t/queue")
        wait_until(lambda: fleet.worker("warm")["slots_in_use"] == 1, 60, "the holder to take the slot")
        waiter = pool.submit(fleet.ask, "t/queue")  # 2 s for warm's slot against a 3 s load: it waits
        wait_until(lambda: line(fleet) == 1, 60, "the waiter to join the line")
        assert fleet.worker("warm")["queue_waiting"] == 0  # unbound: in the line, in no worker's queue
        replica = fleet.ask("t/queue")  # 4 s behind the waiter: the model is loaded on `cold`
        assert replica.headers["x-interlock-worker"] == "cold"
        assert cold.loads == 1
        warm.release()
        assert holder.result().headers["x-interlock-worker"] == "warm"
        # the waiter holds out for warm for the 2 s it expected; on a starved machine it may take
        # cold's slot after that instead: either way it is answered, and nothing else loads
        assert waiter.result().headers["x-interlock-worker"] in {"warm", "cold"}
    assert (warm.loads, cold.loads) == (0, 1)
    learned = fleet.worker("cold")["learned_tokens_per_s"][MODEL]
    assert learned["load_s"] == pytest.approx(0.05, abs=0.01)  # the load it paid, from load_duration


def test_a_waiting_request_goes_to_the_first_worker_whose_slot_frees(
    tmp_path: Path, fleets: list[Fleet]
) -> None:
    """Re-choice: a request that finds every worker full is bound to none; it takes the slot that frees
    first, here on the second worker in plan order while the first still runs."""
    first, second = box("first"), box("second")
    first.preload(MODEL)
    second.preload(MODEL)
    fleet = Fleet(tmp_path, {"first": first, "second": second})
    fleets.append(fleet)
    wait_until(lambda: loaded_on(fleet, "first") and loaded_on(fleet, "second"), 60, "/api/ps")
    first.hold()
    second.hold()
    with ThreadPoolExecutor(3) as pool:
        on_first = pool.submit(fleet.ask, "t/queue")
        wait_until(lambda: fleet.worker("first")["slots_in_use"] == 1, 60, "a slot on first")
        on_second = pool.submit(fleet.ask, "t/queue")
        wait_until(lambda: fleet.worker("second")["slots_in_use"] == 1, 60, "a slot on second")
        waiting = pool.submit(fleet.ask, "t/queue")
        wait_until(lambda: line(fleet) == 1, 60, "the third to wait in the line")
        assert fleet.served.metric("interlock_fleet_waiting", candidate=f"local/{MODEL}") == 1
        second.release()
        assert on_second.result().headers["x-interlock-worker"] == "second"
        assert waiting.result().headers["x-interlock-worker"] == "second"
        assert first.state[MODEL].running == 1  # first is still busy with its request
        first.release()
        assert on_first.result().headers["x-interlock-worker"] == "first"
    assert line(fleet) == 0


def test_with_a_shared_slot_table_a_request_is_bound_to_one_worker_queue(
    tmp_path: Path, fleets: list[Fleet]
) -> None:
    """`--workers 2`: slots live in the supervisor, releases by the other process are not seen, so the
    fleet line is off and a request that finds its worker full waits in that worker's queue."""
    first, second = box("first"), box("second")
    first.preload(MODEL)
    second.preload(MODEL)
    fleet = Fleet(tmp_path, {"first": first, "second": second}, "{}", "--workers", "2")
    fleets.append(fleet)
    wait_until(lambda: loaded_on(fleet, "first") and loaded_on(fleet, "second"), 60, "/api/ps")
    first.hold()
    second.hold()
    with ThreadPoolExecutor(3) as pool:
        calls = [pool.submit(fleet.ask, "t/queue") for _ in range(3)]

        def settled() -> bool:  # each running on a box or waiting in a worker's queue: none unbound
            waiting = sum(fleet.worker(n)["queue_waiting"] for n in ("first", "second"))
            return first.running() + second.running() + waiting == 3

        wait_until(settled, 60, "every request to run or wait in a worker's queue")
        assert "fleet_waiting" not in fleet.served.health()["slot_state"]  # the line is off
        first.release()
        second.release()
        assert {c.result().headers["x-interlock-worker"] for c in calls} <= {"first", "second"}
