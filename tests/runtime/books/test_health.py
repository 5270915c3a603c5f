"""Circuits and endpoint health, on an injected clock."""

from __future__ import annotations

import random

import pytest

from interlock.runtime.base.errors import (
    ClientError,
    ConnectFailed,
    FirstByteTimeout,
    MalformedResponse,
    RateLimited,
    ServerError,
)
from interlock.runtime.books.health import JITTER, HealthBook
from interlock.runtime.loaded.tables import HealthSettings

SETTINGS = HealthSettings(
    probe_interval_s=30, probe_timeout_s=1, failure_threshold=2, open_for_s=60, rate_limit_open_for_s=15
)
FIRST_TRIAL_S = 7.5  # an eighth of open_for


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


class Steady(random.Random):
    """No jitter: every open period is its backoff step exactly."""

    def random(self) -> float:
        return 0.0


@pytest.fixture
def book(clock: Clock) -> HealthBook:
    return HealthBook(SETTINGS, clock=clock, wall=lambda: 1_700_000_000.0 + clock.now, rng=Steady())


def test_threshold_consecutive_transient_failures_open_the_circuit(book: HealthBook, clock: Clock) -> None:
    book.record_failure("p/m", "p", ServerError("boom", status=502))
    assert book.candidate_block("p/m") is None
    book.record_failure("p/m", "p", FirstByteTimeout("slow"))
    assert book.candidate_block("p/m") == "circuit_open"
    clock.now += FIRST_TRIAL_S - 0.1
    assert book.candidate_block("p/m") == "circuit_open"
    clock.now += 0.2
    assert book.candidate_block("p/m") is None  # expired: the next call is the trial


def test_after_expiry_one_more_failure_reopens_at_once(book: HealthBook, clock: Clock) -> None:
    for _ in range(2):
        book.record_failure("p/m", "p", ServerError("boom", status=500))
    clock.now += 61
    book.record_failure("p/m", "p", ServerError("boom", status=500))
    assert book.candidate_block("p/m") == "circuit_open"


def test_failed_trials_double_the_open_period_up_to_open_for(book: HealthBook, clock: Clock) -> None:
    """Half-open trials on a backoff: 7.5, 15, 30 s, then ``open_for`` (60 s) for good."""
    book.record_failure("p/m", "p", ServerError("boom", status=500))
    periods = []
    for _ in range(8):
        book.record_failure("p/m", "p", ServerError("boom", status=500))  # the trial failed
        state = book.candidate("p/m")
        periods.append(state.open_until - clock.now)
        clock.now = state.open_until
    assert periods == [7.5, 15.0, 30.0, 60.0, 60.0, 60.0, 60.0, 60.0]
    book.record_success("p/m", "p")  # a trial answered: the next outage starts short again
    for _ in range(2):
        book.record_failure("p/m", "p", ServerError("boom", status=500))
    assert book.candidate("p/m").open_until - clock.now == FIRST_TRIAL_S


def test_open_periods_are_jittered_so_replicas_do_not_try_in_step(clock: Clock) -> None:
    seen = set()
    for seed in range(20):
        replica = HealthBook(SETTINGS, clock=clock, rng=random.Random(seed))
        for _ in range(2):
            replica.record_failure("p/m", "p", ServerError("boom", status=500))
        period = replica.candidate("p/m").open_until - clock.now
        assert FIRST_TRIAL_S * (1 - JITTER) <= period <= FIRST_TRIAL_S
        seen.add(round(period, 6))
    assert len(seen) == 20


def test_a_passing_probe_brings_a_dead_endpoints_trial_forward(book: HealthBook, clock: Clock) -> None:
    for _ in range(2):
        book.record_failure("p/m", "p@w", ConnectFailed("refused"))
    assert not book.endpoint_usable("p@w")
    book.record_probe("p@w", ConnectFailed("refused"))
    assert not book.endpoint_usable("p@w")
    book.record_probe("p@w", None)  # it connects again
    assert book.endpoint_usable("p@w")


def test_a_check_brings_the_trial_forward_only_when_it_is_evidence(book: HealthBook, clock: Clock) -> None:
    """A model that 500s while its server lists it: the listing passing says nothing; once the listing
    failed too (the whole server was down), its passing again does; a generation always does."""
    for _ in range(2):
        book.record_failure("p/m", "p", ServerError("boom", status=500))
    assert not book.record_check("p/m", True, strong=False)
    assert book.candidate_block("p/m") == "circuit_open"
    assert not book.record_check("p/m", False, strong=False)
    assert book.record_check("p/m", True, strong=False)
    assert book.candidate_block("p/m") is None
    book.record_failure("p/m", "p", ServerError("boom", status=500))  # the trial failed: open again
    assert book.candidate_block("p/m") == "circuit_open"
    assert not book.record_check("p/m", True, strong=False)  # the old failed check no longer counts
    assert book.record_check("p/m", True, strong=True)
    assert book.candidate_block("p/m") is None
    for _ in range(2):
        book.record_failure("p/c", "p", ConnectFailed("refused"))
    assert book.record_check("p/c", True, strong=False)  # it could not connect; now it can
    report = book.candidate_report("p/c")
    assert (report["last_check_ok"], report["next_trial_at"]) == (True, None)


def test_a_first_byte_timeout_while_the_server_reports_progress_never_counts(book: HealthBook) -> None:
    for _ in range(SETTINGS.failure_threshold * 10):
        book.record_failure("p/m", "p", FirstByteTimeout("slow"), spent_s=60.0, busy=True)
    assert book.candidate_block("p/m") is None
    report = book.candidate_report("p/m")
    assert (report["consecutive_failures"], report["slow_timeouts"], report["busy_timeouts"]) == (0, 0, 20)


def test_a_circuit_another_replica_opened_is_open_here_and_its_close_half_opens(
    book: HealthBook, clock: Clock
) -> None:
    told: list[tuple[str, float]] = []
    book.candidate_listener = lambda cid, seconds: told.append((cid, seconds))
    for _ in range(2):
        book.record_failure("p/m", "p", ServerError("boom", status=500))
    assert told == [("p/m", FIRST_TRIAL_S)]
    other = HealthBook(SETTINGS, clock=clock, rng=Steady())
    other.apply_shared_candidate("p/m", FIRST_TRIAL_S)
    assert other.candidate_block("p/m") == "circuit_open"
    other.apply_shared_candidate("p/m", 0.0)
    assert other.candidate_block("p/m") is None
    other.record_failure("p/m", "p", ServerError("boom", status=500))  # its trial here failed: open again
    assert other.candidate_block("p/m") == "circuit_open"
    book.record_success("p/m", "p")
    assert told[-1] == ("p/m", 0.0)


def test_a_circuit_of_a_model_a_caller_named_is_not_shared(book: HealthBook) -> None:
    """Each replica keeps such states bounded (``_ad_hoc``); told of one, another would keep it in its
    plan's table, one entry per name a caller makes up."""
    told: list[tuple[str, float]] = []
    book.candidate_listener = lambda cid, seconds: told.append((cid, seconds))
    for _ in range(2):
        book.record_failure("p/made-up", "p", ServerError("boom", status=500), in_plan=False)
    assert book.candidate_block("p/made-up", in_plan=False) == "circuit_open"
    book.record_success("p/made-up", "p", in_plan=False)
    assert told == []


def test_a_success_closes_the_circuit_and_resets_the_streak(book: HealthBook) -> None:
    for _ in range(2):
        book.record_failure("p/m", "p", ServerError("boom", status=500))
    book.record_success("p/m", "p")
    assert book.candidate_block("p/m") is None
    book.record_failure("p/m", "p", ServerError("boom", status=500))
    assert book.candidate_block("p/m") is None


def test_a_circuit_is_per_candidate(book: HealthBook) -> None:
    for _ in range(2):
        book.record_failure("p/m", "p", ServerError("boom", status=500))
    assert book.candidate_block("p/other") is None
    assert book.endpoint_usable("p")  # server errors do not condemn the endpoint


def test_rate_limits_hold_the_candidate_apart_from_the_streak(book: HealthBook, clock: Clock) -> None:
    book.record_failure("p/m", "p", RateLimited("slow down"))
    assert book.candidate_block("p/m") == "rate_limited"
    assert book.candidate("p/m").failures == 0
    clock.now += 15.1
    assert book.candidate_block("p/m") is None
    book.record_failure("p/m", "p", RateLimited("slow down", retry_after=40))
    clock.now += 39
    assert book.candidate_block("p/m") == "rate_limited"
    clock.now += 1.1
    assert book.candidate_block("p/m") is None


def test_connect_failures_open_the_endpoint_for_every_model(book: HealthBook, clock: Clock) -> None:
    book.record_failure("p/a", "p@w", ConnectFailed("refused"))
    assert book.endpoint_usable("p@w")
    book.record_failure("p/b", "p@w", ConnectFailed("refused"))
    assert not book.endpoint_usable("p@w")
    clock.now += FIRST_TRIAL_S + 0.1
    assert book.endpoint_usable("p@w")


def test_deterministic_errors_are_noted_but_do_not_count(book: HealthBook) -> None:
    for _ in range(3):
        book.record_failure("p/m", "p", ClientError("bad request", status=400))
    assert book.candidate_block("p/m") is None
    report = book.candidate_report("p/m")
    assert (report["last_error_class"], report["last_error_status"]) == ("client_error", 400)


def test_a_malformed_answer_counts_towards_the_circuit(book: HealthBook) -> None:
    """A 200 that is no answer is the upstream failing, not the request being wrong (issue 40)."""
    book.record_failure("p/m", "p", MalformedResponse("response is not valid JSON"))
    assert book.candidate_block("p/m") is None  # failure_threshold 2
    book.record_failure("p/m", "p", MalformedResponse("response has no 'choices'"))
    assert book.candidate_block("p/m") is not None
    assert book.candidate_report("p/m")["last_error_class"] == "malformed"


def test_probes_mark_endpoints_unhealthy_and_healthy(book: HealthBook) -> None:
    book.record_probe("p@w", ConnectFailed("refused"))
    assert not book.endpoint_usable("p@w")
    assert book.endpoint_report("p@w")["last_probe_error_class"] == "connect"
    book.record_probe("p@w", None)
    assert book.endpoint_usable("p@w")
    book.record_probe("p@w", ConnectFailed("refused"))
    book.record_success("p/m", "p@w")  # a real answer beats a failed probe
    assert book.endpoint_usable("p@w")


def test_reports_hold_times_statuses_and_classes_only(book: HealthBook) -> None:
    book.record_success("p/m", "p")
    book.record_failure("p/m", "p", ServerError("secret body text sk-123", status=503))
    book.record_failure("p/m", "p", ServerError("secret body text sk-123", status=503))
    report = book.candidate_report("p/m")
    assert report == {
        "circuit_open_until": "2023-11-14T22:30:07.500Z",
        "next_trial_at": "2023-11-14T22:30:07.500Z",
        "trials_failed": 0,
        "last_check_at": None,
        "last_check_ok": None,
        "next_check_at": None,
        "last_selected": "2023-11-14T22:30:00.000Z",
        "last_success_at": "2023-11-14T22:30:00.000Z",
        "last_error_at": "2023-11-14T22:30:00.000Z",
        "last_error_status": 503,
        "last_error_class": "server_error",
        "consecutive_failures": 2,
        "slow_timeouts": 0,
        "busy_timeouts": 0,
    }
    assert "secret" not in repr(report)


def test_raw_model_states_are_bounded(book: HealthBook) -> None:
    for n in range(1100):
        book.record_failure(f"p/x{n}", "p", ServerError("boom", status=500), in_plan=False)
    assert len(book._ad_hoc) == 1024


def test_a_timeout_while_the_endpoint_answered_another_call_is_slow_not_dead(
    book: HealthBook, clock: Clock
) -> None:
    """A long prefill on a busy server: the call timed out, but the server answered another meanwhile."""
    clock.now += 100
    book.record_success("p/other", "p")  # another model on the same endpoint answered at 1100
    clock.now += 30
    for _ in range(SETTINGS.failure_threshold * 3 - 1):  # each call ran 40 s: from before that answer
        book.record_failure("p/m", "p", FirstByteTimeout("slow"), spent_s=40.0)
    assert book.candidate_block("p/m") is None
    report = book.candidate_report("p/m")
    assert (report["consecutive_failures"], report["slow_timeouts"]) == (0, 5)
    book.record_failure("p/m", "p", FirstByteTimeout("slow"), spent_s=40.0)
    assert book.candidate_block("p/m") == "circuit_open"  # slow every time, three times the threshold


def test_a_timeout_with_no_sign_of_life_in_its_window_counts_as_before(
    book: HealthBook, clock: Clock
) -> None:
    book.record_success("p/other", "p")
    clock.now += 100  # that answer came before the timed-out calls began
    for _ in range(SETTINGS.failure_threshold):
        book.record_failure("p/m", "p", FirstByteTimeout("slow"), spent_s=40.0)
    assert book.candidate_block("p/m") == "circuit_open"
    assert book.candidate_report("p/m")["slow_timeouts"] == 0


def test_a_probe_that_answered_in_the_window_is_no_sign_of_life(book: HealthBook, clock: Clock) -> None:
    """A server answers its model list while one model hangs: only another call answering counts."""
    clock.now += 10
    book.record_probe("p", None)
    clock.now += 5
    for _ in range(SETTINGS.failure_threshold):
        book.record_failure("p/m", "p", FirstByteTimeout("slow"), spent_s=20.0)
    assert book.candidate_block("p/m") == "circuit_open"
    assert book.candidate_report("p/m")["slow_timeouts"] == 0
