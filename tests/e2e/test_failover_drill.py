"""The failover drill (issue 40), scaled down: every scenario of ``tests/e2e/drill.py`` at once through one
`interlock serve` with its default settings, every duration of the plan and of the scripts a fifth.

What is checked is what the caller saw and what each upstream was asked, never a time: no request
hangs, no truncated answer is passed off as complete, and each scenario ends the way its row below
says (who answered, how many attempts each upstream saw). ``bench/failover.py`` runs the same drill in
real time and prints the table with the times.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.e2e.drill import SCENARIOS, Drill, Result, table

SCALE = 0.2

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def drill(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    workdir: Path = tmp_path_factory.mktemp("drill")

    async def run() -> list[Result]:
        async with Drill(SCENARIOS, SCALE, workdir) as running:
            return await running.run()

    results = asyncio.run(run())
    print(table(results, SCALE))
    return {r.name: r for r in results}


def test_no_request_hangs_and_no_truncated_answer_passes_as_complete(drill: dict[str, Result]) -> None:
    assert {name: r.outcome for name, r in drill.items() if r.outcome in ("hang", "truncated")} == {}


@pytest.mark.parametrize("name", ["500-once", "500-once-alone"])
def test_a_500_once_is_retried_on_the_same_candidate(drill: dict[str, Result], name: str) -> None:
    result = drill[name]
    assert (result.outcome, result.answered_by, result.primary, result.fallback) == (
        "rescued",
        "primary",
        2,
        0,
    )
    assert result.log is not None
    assert [(a["candidate"], a["error_class"], a["status"]) for a in result.log["attempts"]] == [
        (f"p-{name}/m", "server_error", 500)
    ]


@pytest.mark.parametrize("name", ["429-retry-after", "429-retry-after-alone"])
def test_a_429_with_retry_after_is_retried_after_its_wait(drill: dict[str, Result], name: str) -> None:
    result = drill[name]
    assert (result.outcome, result.answered_by, result.primary, result.fallback) == (
        "rescued",
        "primary",
        2,
        0,
    )


@pytest.mark.parametrize(
    ("name", "primary"),
    [
        ("429", 2),
        ("503", 2),
        ("reset", 1),
        ("silent", 1),
        ("context-400", 1),
        ("accounting", 2),
    ],
)
def test_a_failing_primary_is_rescued_by_the_fallback(
    drill: dict[str, Result], name: str, primary: int
) -> None:
    """Fast failures safe to repeat are retried once; a reset after the request went (the upstream may
    have done the work), a timeout while a fallback waits, and a context overflow are not."""
    result = drill[name]
    assert (result.outcome, result.answered_by, result.primary, result.fallback) == (
        "rescued",
        "fallback",
        primary,
        1,
    )


def test_a_first_token_20s_late_is_answered_by_the_fallback(drill: dict[str, Result]) -> None:
    """A cloud's default time to first token is well under 20 s: the fallback answers."""
    result = drill["first-token-20s"]
    assert (result.outcome, result.answered_by, result.primary, result.fallback) == (
        "rescued",
        "fallback",
        1,
        1,
    )


def test_a_content_filter_400_goes_back_with_the_upstreams_code(drill: dict[str, Result]) -> None:
    result = drill["content-filter-400"]
    assert (result.outcome, result.primary, result.fallback) == ("clean error", 1, 0)
    assert result.seen is not None
    assert result.seen.status == 400
    error = result.seen.error_body["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "content_policy_violation")


@pytest.mark.parametrize("name", ["cut-40-of-60", "stall-30s", "cut-prefill-rejected"])
def test_a_stream_broken_after_its_first_byte_ends_with_an_error_event(
    drill: dict[str, Result], name: str
) -> None:
    result = drill[name]
    assert (result.outcome, result.answered_by, result.fallback) == ("clean error", "primary", 0)
    assert result.seen is not None
    assert result.seen.error_event
    assert not result.seen.terminated


def test_the_access_log_accounts_a_fallback_to_the_candidate_that_answered(drill: dict[str, Result]) -> None:
    result = drill["accounting"]
    assert result.met, result.note


def test_a_primary_down_under_traffic_loses_no_request(drill: dict[str, Result]) -> None:
    assert drill["down-60s"].outcome == "rescued", drill["down-60s"].note
