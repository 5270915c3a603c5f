"""Retries on the same candidate (``runtime.retry``): which failures, how long a wait, and the walk's budget.

The router's waits are recorded, never slept (``Rig.waits``); the jitter comes from a seeded generator.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.base.errors import (
    AllCandidatesFailed,
    ConnectFailed,
    ConnectTimeout,
    FirstByteTimeout,
    ProtocolFailure,
    RateLimited,
    ServerError,
    TotalTimeout,
    TransientError,
)
from interlock.runtime.books.estimate import needs_of
from interlock.runtime.guards.preflight import Preflight
from interlock.runtime.loaded.plan import DEFAULT_RETRY, RuntimePlan
from interlock.runtime.loaded.tables import RetryPolicy
from interlock.runtime.request.resolve import resolve
from interlock.runtime.request.retry import wait_before_retry
from interlock.runtime.wire.base import Endpoint
from interlock.runtime.wire.error_bodies import error_for_status
from interlock.schema.config import RETRY_DEFAULTS
from tests.runtime.conftest import BASIC, build, compile_text
from tests.runtime.request.test_router import BODY, OK, Rig
from tests.runtime.scripted import Outcome, ScriptedAdapter

POLICY = RetryPolicy(count=2, backoff_s=0.5, retry_after_max_s=5.0)


def wait(error: TransientError, retries: int = 0, *, last: bool = False, seed: int = 1) -> float | None:
    return wait_before_retry(POLICY, error, retries, last=last, rng=random.Random(seed))


@pytest.mark.parametrize(
    "error", [ConnectFailed("refused"), ServerError("down", status=500), RateLimited("x")]
)
def test_fast_failures_are_retried_on_any_candidate_after_a_jittered_doubling_backoff(
    error: TransientError,
) -> None:
    first, second = wait(error, 0), wait(error, 1)
    assert first is not None
    assert second is not None
    assert 0.25 <= first <= 0.5
    assert 0.5 <= second <= 1.0
    assert wait(error, 2) is None  # the policy's count is spent


@pytest.mark.parametrize("error", [ConnectTimeout("slow"), FirstByteTimeout("silent")])
def test_timeouts_are_retried_only_on_the_last_candidate(error: TransientError) -> None:
    assert wait(error, last=False) is None
    assert wait(error, last=True) is not None


@pytest.mark.parametrize("error", [ProtocolFailure("reset after the request went"), TotalTimeout("too long")])
def test_failures_after_the_request_went_are_never_retried(error: TransientError) -> None:
    assert wait(error, last=True) is None


def test_a_retry_after_is_waited_for_up_to_the_policys_cap() -> None:
    assert wait(RateLimited("x", retry_after=2.0)) == 2.0
    assert wait(RateLimited("x", retry_after=5.0)) == 5.0
    assert wait(RateLimited("x", retry_after=6.0)) is None  # longer: move on at once (it is held)


def test_a_503s_retry_after_is_read_and_waited_for() -> None:
    error = error_for_status(503, {"retry-after": "2"}, b"", ())
    assert isinstance(error, ServerError)
    assert error.retry_after == 2.0
    assert wait(error) == 2.0
    assert error_for_status(500, {"retry-after": "2"}, b"", ()).retry_after is None  # type: ignore[attr-defined]


def test_the_runtime_defaults_are_the_schemas() -> None:
    assert (
        DEFAULT_RETRY
        == RetryPolicy()
        == RetryPolicy(
            RETRY_DEFAULTS["count"],
            RETRY_DEFAULTS["backoff"] / 1000,
            RETRY_DEFAULTS["retry_after_max"] / 1000,
        )
    )


class Sequenced(ScriptedAdapter):
    """Each model's outcomes in turn, one per call (the last one repeats)."""

    def __init__(self, script: Mapping[str, list[Outcome]]) -> None:
        super().__init__({})
        self.sequences = {model: list(outcomes) for model, outcomes in script.items()}

    async def _outcome(self, endpoint: Endpoint, model: str, body: Mapping[str, Any]) -> Outcome:
        outcomes = self.sequences[model]
        self.script[model] = outcomes.pop(0) if len(outcomes) > 1 else outcomes[0]
        return await super()._outcome(endpoint, model, body)


def sequenced(plan: RuntimePlan, script: Mapping[str, list[Outcome]]) -> Rig:
    rig = Rig(plan, {})
    rig.adapter = Sequenced(script)
    rig.router.adapters = {"openai": rig.adapter, "ollama": rig.adapter}
    rig.router.rng = random.Random(7)
    return rig


def test_a_single_candidate_alias_survives_one_500(basic_plan: RuntimePlan) -> None:
    rig = sequenced(basic_plan, {"c1": [ServerError("hiccup", status=500), OK]})
    answered = rig.chat("cloud/c1")
    assert answered.candidate.id == "cloud/c1"
    assert rig.called() == ["c1", "c1"]
    assert [(o.candidate, o.error_class, o.status, o.retry) for o in answered.attempts] == [
        ("cloud/c1", "server_error", 500, 0)
    ]
    assert len(rig.waits) == 1
    assert 0.25 <= rig.waits[0] <= 0.5
    labels = {"candidate": "cloud/c1", "error_class": "server_error"}
    assert rig.sample("interlock_upstream_retries_total", **labels) == 1
    assert rig.sample("interlock_upstream_errors_total", **labels) == 1


def test_a_429_with_retry_after_2_is_answered_after_its_wait(basic_plan: RuntimePlan) -> None:
    rig = sequenced(basic_plan, {"c1": [RateLimited("slow down", retry_after=2.0), OK]})
    assert rig.chat("cloud/c1").candidate.id == "cloud/c1"
    assert rig.waits == [2.0]


def test_a_failure_that_opens_the_circuit_is_not_retried(basic_plan: RuntimePlan) -> None:
    rig = sequenced(basic_plan, {"c1": [ServerError("down", status=503)]})
    rig.health.record_failure("cloud/c1", "cloud", ServerError("earlier", status=503))  # one of two
    opened = r"cloud/c1: server_error \[503\], circuit open for [34] s$"  # an eighth of 30 s, jittered
    with pytest.raises(AllCandidatesFailed, match=opened):
        rig.chat("cloud/c1")
    assert rig.called() == ["c1"]


def _deadline_walk(rig: Rig, timeout: bytes) -> Any:
    target = resolve(rig.plan, "cloud/c1")
    preflight = Preflight(needs_of(BODY, "chat", rig.plan.preflight), "enforce", rig.plan.preflight)
    preflight.request_headers = [(b"x-stainless-timeout", timeout)]
    preflight.started = time.perf_counter()
    return asyncio.run(rig.router.chat(target, BODY, preflight))


def test_no_retry_waits_past_the_callers_own_deadline(basic_plan: RuntimePlan) -> None:
    """The OpenAI and Anthropic SDKs send their timeout with every request: a 1 s caller is told 429 at
    once, not after a 2 s wait it would never see the end of."""
    rig = sequenced(basic_plan, {"c1": [RateLimited("slow down", retry_after=2.0), OK]})
    with pytest.raises(AllCandidatesFailed) as info:
        _deadline_walk(rig, b"1")
    assert (info.value.status, rig.waits) == (429, [])
    rig = sequenced(basic_plan, {"c1": [RateLimited("slow down", retry_after=2.0), OK]})
    assert _deadline_walk(rig, b"600").candidate.id == "cloud/c1"
    assert rig.waits == [2.0]


ALIAS_RETRY = BASIC.replace(
    "    description: cloud only\n",
    "    description: cloud only\n    retry: {count: 0}\n",
).replace("    api_key_env: CLOUD_KEY\n", "    api_key_env: CLOUD_KEY\n    retry: {count: 2, backoff: 1s}\n")


def test_an_alias_overrides_its_candidates_providers_retries(tmp_path: Path) -> None:
    data = compile_text(tmp_path, ALIAS_RETRY)
    assert data["providers"]["cloud"]["retry"] == {"count": 2, "backoff_ms": 1000, "retry_after_max_ms": 5000}
    assert data["providers"]["free"]["retry"] == {"count": 1, "backoff_ms": 500, "retry_after_max_ms": 5000}
    assert data["aliases"]["t/cloud"]["retry"] == {"count": 0}
    assert "retry" not in data["aliases"]["t/chat"]  # written only where set
    plan = build(data)
    rig = sequenced(plan, {"c1": [ServerError("down", status=500)], "f1": [OK]})
    assert rig.chat("t/cloud").candidate.id == "free/f1"
    assert rig.called() == ["c1", "f1"]  # the alias: none
    rig = sequenced(
        plan, {"m1": [ProtocolFailure("cut")], "c1": [ServerError("down", status=500)], "f1": [OK]}
    )
    assert rig.chat("t/chat").candidate.id == "free/f1"
    assert rig.called() == ["m1", "c1", "c1", "f1"]  # the provider's two, but its circuit opened after one


class Slow(Sequenced):
    """Each call takes ``seconds`` before its outcome (an upstream that times out after a while)."""

    def __init__(self, script: Mapping[str, list[Outcome]], seconds: float) -> None:
        super().__init__(script)
        self.seconds = seconds

    async def _outcome(self, endpoint: Endpoint, model: str, body: Mapping[str, Any]) -> Outcome:
        await asyncio.sleep(self.seconds)
        return await super()._outcome(endpoint, model, body)


def test_a_timeout_is_tried_again_only_when_another_as_long_still_ends_before_the_callers_deadline(
    basic_plan: RuntimePlan,
) -> None:
    """The call took 1 s to time out: a caller that waits 2.2 s in all has no room for a second one."""
    for timeout, calls in ((b"2.2", ["c1"]), (b"600", ["c1", "c1"])):
        rig = sequenced(basic_plan, {})
        rig.adapter = Slow({"c1": [FirstByteTimeout("no first byte"), OK]}, 1.0)
        rig.router.adapters = {"openai": rig.adapter, "ollama": rig.adapter}
        if calls == ["c1"]:
            with pytest.raises(AllCandidatesFailed):
                _deadline_walk(rig, timeout)
        else:
            assert _deadline_walk(rig, timeout).candidate.id == "cloud/c1"
        assert rig.called() == calls


def test_the_waits_of_one_walk_together_stay_within_the_budget(basic_plan: RuntimePlan) -> None:
    """Every candidate asks for 3 s: the first is waited for, the second would pass 5 s in all."""
    limited = RateLimited("slow down", retry_after=3.0)
    rig = sequenced(basic_plan, {"m1": [limited], "c1": [limited], "f1": [OK]})
    assert rig.chat().candidate.id == "free/f1"
    assert (rig.called(), rig.waits) == (["m1", "m1", "c1", "f1"], [3.0])
