"""When no candidate answers: each candidate's original failure, 429 vs 503, and when to come back.

The health book runs on an injected clock: holds are advanced, never slept through. Its circuits open
for ``open_for`` at once here, without jitter: what is tested is how holds are told, not the backoff
(tests/runtime/books/test_health.py).
"""

from __future__ import annotations

import pytest

from interlock.runtime.base.errors import (
    AllCandidatesFailed,
    CandidateOutcome,
    ConnectFailed,
    RateLimited,
    ServerError,
)
from interlock.runtime.books import health
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.surfaces.openai import describe_error
from tests.runtime.books.test_health import Clock
from tests.runtime.request.test_router import OK, Rig


@pytest.fixture(autouse=True)
def whole_open_periods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "FIRST_TRIAL", 1.0)
    monkeypatch.setattr(health, "JITTER", 0.0)


def rig_with_clock(plan: RuntimePlan, script: dict[str, object]) -> tuple[Rig, Clock]:
    rig = Rig(plan, script)
    clock = Clock()
    rig.health.clock = clock  # the guard and the router share this book
    return rig, clock


def failed(rig: Rig, model: str = "t/chat") -> AllCandidatesFailed:
    with pytest.raises(AllCandidatesFailed) as info:
        rig.chat(model)
    return info.value


def test_every_candidate_rate_limited_is_a_429_with_the_earliest_retry_after(basic_plan: RuntimePlan) -> None:
    rig, clock = rig_with_clock(
        basic_plan,
        {
            "m1": RateLimited("slow down", retry_after=20),
            "c1": RateLimited("slow down", retry_after=7),
            "f1": RateLimited("slow down"),  # no Retry-After: the plan's rate_limit_open_for (5s)
        },
    )
    first = failed(rig)
    assert (first.status, first.type, first.code, first.retry_after) == (
        429,
        "rate_limit_error",
        "all_candidates_rate_limited",
        5.0,
    )
    assert first.message == (
        "no candidate of t/chat could answer (3 of 3 attempted): local/m1: rate_limited [429], holding 20 s; "
        "cloud/c1: rate_limited [429], holding 7 s; free/f1: rate_limited [429] after 1 retry, holding 5 s"
    )  # a Retry-After over the retry's 5 s moves on at once; none: one retry after its backoff
    clock.now += 2.5
    rig.adapter.calls.clear()
    second = failed(rig)  # nothing is called: every candidate is still held, and keeps its 429
    assert rig.called() == []
    assert (second.status, second.retry_after) == (429, 2.5)
    assert second.message == (
        "no candidate of t/chat could answer (0 of 3 attempted): local/m1: rate_limited [429], holding 18 s; "
        "cloud/c1: rate_limited [429], holding 5 s; free/f1: rate_limited [429], holding 3 s"
    )
    status, _, headers = describe_error(second, basic_plan)
    assert (status, headers) == (429, [(b"retry-after", b"3"), (b"retry-after-ms", b"2500")])


def test_rate_limits_and_open_circuits_together_are_a_503_with_retry_after(basic_plan: RuntimePlan) -> None:
    rig, clock = rig_with_clock(
        basic_plan,
        {"m1": ServerError("down", status=500), "c1": RateLimited("slow down", retry_after=40), "f1": OK},
    )
    rig.chat()  # local/m1 fails, and its retry (failure_threshold 2): its circuit opens for 30 s;
    # cloud/c1 is held 40 s (a Retry-After over the retry's 5 s: not waited for)
    rig.adapter.script["f1"] = ServerError("down", status=502)
    clock.now += 10
    error = failed(rig)  # free/f1 fails twice too (a retry): its circuit opens
    assert (error.status, error.code, error.retry_after) == (503, "all_candidates_failed", 20.0)
    assert error.message == (
        "no candidate of t/chat could answer (1 of 3 attempted): "
        "local/m1: server_error [500], circuit open for 20 s; cloud/c1: rate_limited [429], holding 30 s; "
        "free/f1: server_error [502] after 1 retry, circuit open for 30 s"
    )
    status, payload, headers = describe_error(error, basic_plan)
    assert status == 503
    assert headers == [(b"retry-after", b"20"), (b"retry-after-ms", b"20000")]
    assert b'"type":"server_error"' in payload


def test_a_candidate_down_for_an_unknown_time_means_no_retry_after(basic_plan: RuntimePlan) -> None:
    rig, _ = rig_with_clock(
        basic_plan, {"m1": OK, "c1": RateLimited("slow down", retry_after=7), "f1": ConnectFailed("refused")}
    )
    rig.health.record_probe("local@box1", ConnectFailed("probe refused"))  # down until a probe succeeds
    error = failed(rig)
    assert (error.status, error.retry_after) == (503, None)
    assert error.message == (
        "no candidate of t/chat could answer (2 of 3 attempted): local/m1: skipped (unhealthy); "
        "cloud/c1: rate_limited [429], holding 7 s; free/f1: connect after 1 retry, circuit open for 30 s"
    )
    assert describe_error(error, basic_plan)[2] == []


def test_an_endpoint_circuit_holds_its_candidates_until_it_closes(basic_plan: RuntimePlan) -> None:
    rig, clock = rig_with_clock(
        basic_plan,
        {"m1": ConnectFailed("refused"), "c1": RateLimited("slow down", retry_after=60), "f1": OK},
    )
    rig.chat()
    rig.chat()  # two connect failures: the circuit of the worker local@box1 opens (and the candidate's)
    rig.health.candidate("local/m1").open_until = 0.0  # only the endpoint's circuit is left
    rig.adapter.script["f1"] = RateLimited("slow down", retry_after=90)
    clock.now += 1
    error = failed(rig)
    assert error.outcomes[0] == CandidateOutcome(
        "local/m1", "connect", None, called=False, hold="circuit_open", hold_s=29.0
    )
    assert (error.status, error.retry_after) == (503, 29.0)
    assert error.message.startswith(
        "no candidate of t/chat could answer (1 of 3 attempted): local/m1: connect, circuit open for 29 s; "
    )


def test_whole_seconds_round_up_and_never_say_zero() -> None:
    outcome = CandidateOutcome("p/m", "rate_limited", 429, called=True, hold="rate_limited", hold_s=0.2)
    assert outcome.describe() == "rate_limited [429], holding 1 s"
    assert AllCandidatesFailed("t/x", [outcome]).retry_after == 0.2
