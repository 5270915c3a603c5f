"""The fallback walk, step by step, with a scripted adapter (no sockets)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from interlock.runtime.base.errors import (
    AllCandidatesFailed,
    CannotServe,
    ClientError,
    ConnectFailed,
    ConnectTimeout,
    FirstByteTimeout,
    MalformedResponse,
    NoCandidateCanServe,
    ProtocolFailure,
    RateLimited,
    ServerError,
    SlotUnavailable,
    TotalTimeout,
    TransientError,
    UpstreamError,
)
from interlock.runtime.books.estimate import needs_of
from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics, StateView
from interlock.runtime.books.record import Answered, CandidateRefused
from interlock.runtime.fleet.live_facts import LiveFacts
from interlock.runtime.fleet.scoring import Scorer, backend_occupancy
from interlock.runtime.fleet.speeds import SpeedBook
from interlock.runtime.guards.circuit import HealthGuard
from interlock.runtime.guards.preflight import Misfit, Preflight
from interlock.runtime.guards.slots import SlotGuard
from interlock.runtime.loaded.callers import Turn
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.request.resolve import resolve
from interlock.runtime.request.retry import FAST
from interlock.runtime.request.router import Router, _unservable
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.telemetry.collector import TelemetryBook
from interlock.runtime.wire.base import ChatStream
from tests.runtime.conftest import BASIC, build
from tests.runtime.scripted import ScriptedAdapter
from tests.waiting import until

OK = {"object": "chat.completion", "model": "upstream-name", "choices": []}
BODY = {"model": "t/chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 42}


class Rig:
    def __init__(self, plan: RuntimePlan, script: dict[str, Any]) -> None:
        self.plan = plan
        self.health = HealthBook(plan.health)
        self.slots = MemorySlots()
        self.slots.configure(plan.workers)
        self.metrics = Metrics(StateView(lambda: plan, self.health, self.slots))
        self.adapter = ScriptedAdapter(script)
        scorer = Scorer(
            LiveFacts(), TelemetryBook(), SpeedBook(), backend_occupancy(self.slots, lambda: plan.workers)
        )
        guards = (
            HealthGuard(self.health),
            SlotGuard(self.slots, scorer, lambda: plan.routing, metrics=self.metrics),
        )
        self.router = Router(
            self.health, guards, {"openai": self.adapter, "ollama": self.adapter}, self.metrics
        )
        self.waits: list[float] = []  # each retry's wait, not waited (``runtime.retry``)
        self.router.sleep = self._no_wait

    async def _no_wait(self, seconds: float) -> None:
        self.waits.append(seconds)

    def chat(self, model: str = "t/chat") -> Any:
        return asyncio.run(self.router.chat(resolve(self.plan, model), BODY))

    def called(self) -> list[str]:
        return [model for _, model, _ in self.adapter.calls]

    def sample(self, name: str, **labels: str) -> float | None:
        value: float | None = self.metrics.registry.get_sample_value(name, labels)
        return value


def test_the_first_healthy_candidate_answers(basic_plan: RuntimePlan) -> None:
    rig = Rig(basic_plan, {"m1": OK})
    answered = rig.chat()
    assert (answered.candidate.id, answered.result["object"]) == ("local/m1", "chat.completion")
    assert rig.called() == ["m1"]
    assert rig.sample("interlock_alias_resolved_total", alias="t/chat", candidate="local/m1") == 1
    assert rig.slots.pools["box1"].in_use == 0


TRANSIENT = [
    ConnectFailed("refused"),
    ConnectTimeout("connect timed out"),
    FirstByteTimeout("no first byte"),
    TotalTimeout("too long"),
    ProtocolFailure("server disconnected"),
    ServerError("bad gateway", status=502),
    ServerError("cloudflare", status=524),
    RateLimited("slow down", retry_after=3),
    MalformedResponse("response is not valid JSON"),  # a 200 that is not an answer: the upstream failed
]


@pytest.mark.parametrize("error", TRANSIENT, ids=lambda e: type(e).__name__ + str(e.status or ""))
def test_transient_errors_move_on_with_the_unchanged_request(
    basic_plan: RuntimePlan, error: TransientError
) -> None:
    """A failure safe to repeat that fails fast is tried once more first (``runtime.retry.FAST``)."""
    rig = Rig(basic_plan, {"m1": error, "c1": OK})
    answered = rig.chat()
    assert answered.candidate.id == "cloud/c1"
    retried = isinstance(error, FAST)
    assert rig.called() == (["m1", "m1", "c1"] if retried else ["m1", "c1"])
    assert all(call[2] == BODY for call in rig.adapter.calls)
    assert len(rig.waits) == retried
    assert (
        rig.sample(
            "interlock_fallback_total",
            from_candidate="local/m1",
            to_candidate="cloud/c1",
            reason=error.error_class,
        )
        == 1
    )


@pytest.mark.parametrize(
    "error",
    [ClientError("bad", status=s) for s in (400, 401, 403, 404, 422)],
    ids=lambda e: type(e).__name__ + str(e.status or ""),
)
def test_deterministic_errors_return_at_once(basic_plan: RuntimePlan, error: UpstreamError) -> None:
    rig = Rig(basic_plan, {"m1": error, "c1": OK})
    with pytest.raises(CandidateRefused) as info:
        rig.chat()
    assert (info.value.candidate.id, info.value.error) == ("local/m1", error)
    assert rig.called() == ["m1"]
    assert rig.slots.pools["box1"].in_use == 0


def test_an_open_circuit_is_skipped_without_a_call(basic_plan: RuntimePlan) -> None:
    rig = Rig(basic_plan, {"m1": ServerError("down", status=503), "c1": OK})
    rig.chat()  # a failure and its retry: failure_threshold is 2, the circuit of local/m1 is open now
    rig.adapter.calls.clear()
    assert rig.chat().candidate.id == "cloud/c1"
    assert rig.called() == ["c1"]
    assert (
        rig.sample(
            "interlock_fallback_total",
            from_candidate="local/m1",
            to_candidate="cloud/c1",
            reason="circuit_open",
        )
        == 1
    )


def test_an_unhealthy_endpoint_is_skipped_without_a_call(basic_plan: RuntimePlan) -> None:
    rig = Rig(basic_plan, {"m1": OK, "c1": OK})
    rig.health.record_probe("local@box1", ConnectFailed("probe refused"))
    assert rig.chat().candidate.id == "cloud/c1"
    assert rig.called() == ["c1"]


def test_all_failed_or_skipped_gives_a_bounded_summary(basic_plan: RuntimePlan) -> None:
    rig = Rig(
        basic_plan,
        {"m1": OK, "c1": ServerError("<html>secret body</html>", status=503), "f1": ConnectFailed("refused")},
    )
    rig.health.record_probe("local@box1", ConnectFailed("probe refused"))
    with pytest.raises(
        AllCandidatesFailed,
        match=r"^no candidate of t/chat could answer \(2 of 3 attempted\): local/m1: skipped \(unhealthy\); "
        r"cloud/c1: server_error \[503\] after 1 retry, circuit open for [34] s; "  # an eighth of 30 s
        r"free/f1: connect after 1 retry, circuit open for [34] s$",
    ):
        rig.chat()
    assert (
        rig.sample(
            "interlock_fallback_total", from_candidate="free/f1", to_candidate="none", reason="connect"
        )
        == 1
    )


def test_a_stream_that_fails_before_its_first_chunk_falls_back(basic_plan: RuntimePlan) -> None:
    rig = Rig(basic_plan, {"m1": [ProtocolFailure("cut")], "c1": [{"choices": []}]})

    async def deliver(answered: Answered[ChatStream]) -> tuple[str, int]:
        return answered.candidate.id, rig.slots.pools["box1"].in_use

    delivered = asyncio.run(rig.router.chat_stream(resolve(basic_plan, "t/chat"), BODY, deliver))
    assert delivered == ("cloud/c1", 0)  # the failed candidate's slot came back before the next one
    assert rig.slots.pools["box1"].in_use == 0


def test_a_stream_holds_its_slot_while_it_is_delivered(basic_plan: RuntimePlan) -> None:
    rig = Rig(basic_plan, {"m1": [{"choices": []}]})

    async def deliver(answered: Answered[ChatStream]) -> int:
        return rig.slots.pools["box1"].in_use

    assert asyncio.run(rig.router.chat_stream(resolve(basic_plan, "t/chat"), BODY, deliver)) == 1
    assert rig.slots.pools["box1"].in_use == 0


def test_a_stream_whose_delivery_fails_or_is_cancelled_gives_its_slot_back(basic_plan: RuntimePlan) -> None:
    rig = Rig(basic_plan, {"m1": [{"choices": []}, {"choices": []}]})
    target = resolve(basic_plan, "t/chat")

    async def broken(answered: Answered[ChatStream]) -> int:
        raise OSError("the client's socket broke")

    with pytest.raises(OSError, match=r"^the client's socket broke$"):
        asyncio.run(rig.router.chat_stream(target, BODY, broken))
    assert rig.slots.pools["box1"].in_use == 0

    async def scenario() -> None:
        writing = asyncio.Event()

        async def forever(answered: Answered[ChatStream]) -> int:
            writing.set()
            await asyncio.Event().wait()
            return 0

        task = asyncio.create_task(rig.router.chat_stream(target, BODY, forever))
        await writing.wait()
        assert rig.slots.pools["box1"].in_use == 1
        task.cancel()  # the client went away mid-stream
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert rig.slots.pools["box1"].in_use == 0


def test_a_full_worker_spills_to_the_next_candidate_at_once(basic_plan: RuntimePlan) -> None:
    rig = Rig(basic_plan, {"m1": OK, "c1": OK})
    held = rig.slots.pools["box1"].try_acquire("m1", 1)
    assert held is not None
    answered = rig.chat()  # `on_saturation: fallback` (the default): no wait in box1's queue
    assert (answered.candidate.id, rig.called()) == ("cloud/c1", ["c1"])
    assert len(rig.slots.pools["box1"].waiters) == 0
    labels = {"from_candidate": "local/m1", "to_candidate": "cloud/c1", "reason": "saturated"}
    assert rig.sample("interlock_fallback_total", **labels) == 1
    held.release()


def test_under_queue_a_full_worker_answers_429_instead_of_spilling_over(
    plan_data: Callable[..., dict[str, Any]],
) -> None:
    queued = BASIC.replace(
        "chain: [local/m1, cloud/c1, free/f1]",
        "chain: [local/m1, cloud/c1, free/f1]\n    on_saturation: queue",
    )
    plan = build(plan_data(queued))
    rig = Rig(plan, {"m1": OK, "c1": OK})
    pool = rig.slots.pools["box1"]
    pool.max_wait_s = 0.05
    held = pool.try_acquire("m1", 1)
    assert held is not None
    with pytest.raises(
        SlotUnavailable, match=r"^worker box1 had no free slot for m1 within 0.05s \(0 waiting\)$"
    ):
        rig.chat()
    assert rig.called() == []
    held.release()
    assert pool.in_use == 0


def test_a_workers_own_on_saturation_wins_over_the_aliases(
    plan_data: Callable[..., dict[str, Any]],
) -> None:
    worker_queues = BASIC.replace(
        "queue: {max_waiting: 2, max_wait: 1s}",
        "queue: {max_waiting: 2, max_wait: 1s}\n        on_saturation: queue",
    )
    rig = Rig(build(plan_data(worker_queues)), {"m1": OK, "c1": OK})  # alias: fallback (the default)
    pool = rig.slots.pools["box1"]
    pool.max_wait_s = 0.05
    held = pool.try_acquire("m1", 1)
    assert held is not None
    with pytest.raises(SlotUnavailable):
        rig.chat()
    held.release()
    worker_spills = BASIC.replace(
        "queue: {max_waiting: 2, max_wait: 1s}",
        "queue: {max_waiting: 2, max_wait: 1s}\n        on_saturation: fallback",
    ).replace(
        "chain: [local/m1, cloud/c1, free/f1]",
        "chain: [local/m1, cloud/c1, free/f1]\n    on_saturation: queue",
    )
    rig = Rig(build(plan_data(worker_spills)), {"m1": OK, "c1": OK})
    held = rig.slots.pools["box1"].try_acquire("m1", 1)
    assert held is not None
    assert rig.chat().candidate.id == "cloud/c1"
    held.release()


def test_a_cancelled_call_gives_its_slot_back(basic_plan: RuntimePlan) -> None:
    rig = Rig(basic_plan, {"m1": 10.0})

    async def scenario() -> None:
        task = asyncio.create_task(rig.router.chat(resolve(basic_plan, "t/chat"), BODY))
        for _ in range(10):  # let the walk reach the adapter
            await asyncio.sleep(0)
        assert rig.slots.pools["box1"].in_use == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert rig.slots.pools["box1"].in_use == 0


def test_direct_models_are_one_candidate_chains(basic_plan: RuntimePlan) -> None:
    rig = Rig(basic_plan, {"other": OK})
    answered = rig.chat("local/other")
    assert answered.candidate.id == "local/other"
    assert rig.sample("interlock_alias_resolved_total", alias="(direct)", candidate="local/*") == 1


TWO_WORKERS = """\
version: 1
server: {default_alias: t/two, alias_namespace: t/}
providers:
  local:
    kind: ollama
    workers:
      - {name: w1, url: "http://127.0.0.1:9/", max_concurrent: 1, queue: {max_waiting: 4, max_wait: 1s}}
      - {name: w2, url: "http://127.0.0.2:9/", max_concurrent: 1, queue: {max_waiting: 4, max_wait: 1s}}
  cloud: {kind: openai, base_url: "http://127.0.0.1:9/v1", api_key_env: CLOUD_KEY}
aliases:
  t/two: {description: two workers, chain: [local/m1, cloud/c1], on_saturation: queue}
"""


def test_a_provider_with_several_workers_uses_a_healthy_one_with_a_free_slot(
    plan_data: Callable[..., dict[str, Any]],
) -> None:
    plan = build(plan_data(TWO_WORKERS))
    rig = Rig(plan, {"m1": OK, "c1": OK})
    assert rig.chat("t/two").route.worker == "w1"
    held = rig.slots.pools["w1"].try_acquire("m1", 1)  # w1 busy: w2 takes it
    assert rig.chat("t/two").route.worker == "w2"
    assert held is not None
    held.release()
    rig.health.record_probe("local@w1", ConnectFailed("refused"))  # w1 dead: w2, without touching w1
    rig.adapter.calls.clear()
    assert rig.chat("t/two").route.worker == "w2"
    assert [label for label, _, _ in rig.adapter.calls] == ["local@w2"]
    rig.health.record_probe("local@w2", ConnectFailed("refused"))  # both dead: the next candidate
    assert rig.chat("t/two").candidate.id == "cloud/c1"


def test_with_every_worker_busy_the_request_waits_on_the_shortest_queue(
    plan_data: Callable[..., dict[str, Any]],
) -> None:
    plan = build(plan_data(TWO_WORKERS))
    rig = Rig(plan, {"m1": OK})

    async def scenario() -> str | None:
        w1 = rig.slots.pools["w1"]
        w2 = rig.slots.pools["w2"]
        held = [w1.try_acquire("m1", 1), w2.try_acquire("m1", 1)]
        queued_on_w1 = asyncio.create_task(w1.acquire("m1", 1))
        await asyncio.sleep(0)
        walk = asyncio.create_task(rig.router.chat(resolve(plan, "t/two"), BODY))
        for _ in range(5):
            await asyncio.sleep(0)
        assert (len(w1.waiters), len(w2.waiters)) == (1, 1)
        held[1].release()  # type: ignore[union-attr]
        answered = await walk
        held[0].release()  # type: ignore[union-attr]
        (await queued_on_w1).release()
        return answered.route.worker

    assert asyncio.run(scenario()) == "w2"


def test_a_candidate_that_cannot_serve_is_skipped_without_a_mark_on_its_health(
    basic_plan: RuntimePlan,
) -> None:
    refusal = CannotServe("Ollama answers one choice per request; `n` is 2", param="n")
    rig = Rig(basic_plan, {"m1": refusal, "c1": OK})
    for _ in range(3):  # more than failure_threshold: a refusal never opens the circuit
        assert rig.chat().candidate.id == "cloud/c1"
    assert rig.called() == ["m1", "c1"] * 3
    assert rig.slots.pools["box1"].in_use == 0
    report = rig.health.candidate_report("local/m1")
    assert (report["last_error_at"], report["consecutive_failures"], report["circuit_open_until"]) == (
        None,
        0,
        None,
    )
    assert rig.health.endpoint_report("local@box1")["last_error_at"] is None
    fallback = {"from_candidate": "local/m1", "to_candidate": "cloud/c1", "reason": "unsupported_n"}
    assert rig.sample("interlock_fallback_total", **fallback) == 3
    errors = [
        sample
        for family in rig.metrics.registry.collect()
        if family.name == "interlock_upstream_errors"
        for sample in family.samples
        if sample.name.endswith("_total")
    ]
    assert sum(sample.value for sample in errors) == 0


def test_when_no_candidate_can_serve_the_answer_is_400_naming_each(basic_plan: RuntimePlan) -> None:
    rig = Rig(
        basic_plan,
        {
            "m1": CannotServe("Ollama answers one choice per request; `n` is 2", param="n"),
            "c1": CannotServe("no n here", param="n"),
            "f1": CannotServe("not this one either", param="n"),
        },
    )
    with pytest.raises(
        NoCandidateCanServe,
        match=r"^no candidate of t/chat can serve this request: local/m1: Ollama answers one choice per "
        r"request; `n` is 2; cloud/c1: no n here; free/f1: not this one either$",
    ) as info:
        rig.chat()
    assert (info.value.status, info.value.param, info.value.code) == (400, "n", "unsupported_by_candidates")


def test_refusals_beside_failures_are_a_503_whose_summary_says_why(basic_plan: RuntimePlan) -> None:
    rig = Rig(
        basic_plan,
        {
            "m1": CannotServe("remote image URLs are not fetched", param="messages[0].content[1].image_url"),
            "c1": ServerError("down", status=503),
            "f1": CannotServe("no", param="n"),
        },
    )
    with pytest.raises(
        AllCandidatesFailed,
        match=r"^no candidate of t/chat could answer \(1 of 3 attempted\): local/m1: skipped "
        r"\(unsupported_messages\); cloud/c1: server_error \[503\] after 1 retry, circuit open for [34] s; "
        r"free/f1: skipped \(unsupported_n\)$",
    ):
        rig.chat()
    reason = "unsupported_messages"
    assert (
        rig.sample(
            "interlock_fallback_total", from_candidate="local/m1", to_candidate="cloud/c1", reason=reason
        )
        == 1
    )


def test_a_refusal_is_known_before_the_guards_so_no_slot_is_queued_for(basic_plan: RuntimePlan) -> None:
    rig = Rig(basic_plan, {"c1": OK})
    refusal = CannotServe("Ollama answers one choice per request; `n` is 2", param="n")
    rig.router.adapters = {"openai": rig.adapter, "ollama": ScriptedAdapter({}, refuse=refusal)}
    pool = rig.slots.pools["box1"]
    held = pool.try_acquire("m1", 1)  # the worker is full: queueing would wait, then answer 429
    assert held is not None
    try:
        assert rig.chat().candidate.id == "cloud/c1"
    finally:
        held.release()
    assert rig.called() == ["c1"]
    assert rig.sample("interlock_slot_wait_seconds_count", worker="box1") in (None, 0)
    fallback = {"from_candidate": "local/m1", "to_candidate": "cloud/c1", "reason": "unsupported_n"}
    assert rig.sample("interlock_fallback_total", **fallback) == 1


def test_refusals_and_preflight_misfits_together_are_a_400_naming_each(basic_plan: RuntimePlan) -> None:
    target = resolve(basic_plan, "t/chat")  # local/m1, cloud/c1, free/f1
    preflight = Preflight(needs_of({"messages": []}, "chat", basic_plan.preflight), "enforce")
    preflight.misfits.append(Misfit("cloud/c1", "capability", "lacks_vision", "lacks vision"))
    preflight.misfits.append(Misfit("free/f1", "capability", "lacks_vision", "lacks vision"))
    refusal = CannotServe("Ollama answers one choice per request; `n` is 2", param="n")
    by_id = {c.id: c for c in target.candidates}
    mixed = _unservable(target, [(by_id["local/m1"], refusal)], preflight)
    assert isinstance(mixed, NoCandidateCanServe)
    assert (mixed.message, mixed.param) == (
        "no candidate of t/chat can serve this request: local/m1: Ollama answers one choice per request; "
        "`n` is 2; cloud/c1: lacks vision; free/f1: lacks vision",
        None,
    )
    assert _unservable(target, [], preflight) is None  # local/m1 was not a misfit: it may have failed
    preflight.misfits.insert(0, Misfit("local/m1", "capability", "lacks_vision", "lacks vision"))
    assert type(_unservable(target, [], preflight)).__name__ == "CapabilityMissing"  # the preflight's own


def test_who_waited_is_counted_by_tenant_and_class(plan_data: Callable[..., dict[str, Any]]) -> None:
    """A batch request of tenant `lab` waits (counted waiting), then is handed the slot (its wait
    observed); another waits past max_wait (turned away, its wait not observed); a request that finds
    a slot counts nowhere."""
    queued = BASIC.replace(
        "chain: [local/m1, cloud/c1, free/f1]",
        "chain: [local/m1, cloud/c1, free/f1]\n    on_saturation: queue",
    )
    plan = build(plan_data(queued))
    rig = Rig(plan, {"m1": OK})
    labels = {"tenant": "lab", "class": "batch"}

    def asked() -> Preflight:
        preflight = Preflight(needs_of(dict(BODY), "chat", plan.preflight), plan.preflight.mode)
        preflight.turn = Turn("lab", 2.0, batch=True)
        return preflight

    async def scenario() -> None:
        pool = rig.slots.pools["box1"]
        held = pool.try_acquire("m1", 1)
        assert held is not None
        walk = asyncio.create_task(rig.router.chat(resolve(plan, "t/chat"), BODY, asked()))
        await until(lambda: rig.sample("interlock_queue_waiting", **labels) == 1, pause_s=0)
        held.release()
        assert (await walk).candidate.id == "local/m1"
        assert rig.sample("interlock_queue_waiting", **labels) == 0
        assert rig.sample("interlock_queue_wait_seconds_count", **labels) == 1
        held = pool.try_acquire("m1", 1)
        assert held is not None
        pool.max_wait_s = 0.01  # the wait runs out (a state the test waits on, not a time it asserts)
        with pytest.raises(SlotUnavailable):
            await rig.router.chat(resolve(plan, "t/chat"), BODY, asked())
        held.release()
        assert rig.sample("interlock_queue_turned_away_total", **labels) == 1
        await rig.router.chat(resolve(plan, "t/chat"), BODY, asked())  # a free slot: not counted
        assert rig.sample("interlock_queue_wait_seconds_count", **labels) == 1  # the 429's is not a wait

    asyncio.run(scenario())
