"""Every gateway answer is mapped at the surface to its own status and code, never to a 500."""

from __future__ import annotations

import orjson

from interlock.runtime import errors
from interlock.runtime.plan import RuntimePlan
from interlock.runtime.surfaces.openai import describe_error


def _subclasses(cls: type) -> list[type]:
    found, stack = [], [cls]
    while stack:
        for sub in stack.pop().__subclasses__():
            found.append(sub)
            stack.append(sub)
    return found


def test_every_gateway_error_is_answered_with_its_own_status_and_code(basic_plan: RuntimePlan) -> None:
    classes = _subclasses(errors.GatewayError)
    assert errors.NoCandidateCanServe in classes
    outcome = errors.CandidateOutcome("local/m1", "unsupported_n", cannot_serve=True)
    special = {errors.AllCandidatesFailed: lambda: errors.AllCandidatesFailed("t/chat", [outcome])}
    for cls in classes:
        if cls in special:
            exc = special[cls]()
        elif issubclass(cls, errors.TryLater):
            exc = cls("what happened", retry_after=2.0)
        else:
            exc = cls("what happened")
        status, payload, _ = describe_error(exc, basic_plan)
        body = orjson.loads(payload)["error"]
        assert (status, body["type"], body["code"], body["message"]) == (
            cls.status,
            cls.type,
            cls.code,
            exc.message,
        ), cls


def test_a_candidate_that_cannot_serve_never_makes_the_others_look_unheld() -> None:
    """Retry-After and the 429 are about the candidates a retry could reach: not one that refused."""
    refused = errors.CandidateOutcome("local/m1", "unsupported_n", cannot_serve=True)
    held = errors.CandidateOutcome("cloud/c1", "rate_limited", 429, True, "rate_limited", 7.0)
    failed = errors.AllCandidatesFailed("t/chat", [refused, held])
    assert (failed.status, failed.code, failed.retry_after) == (429, "all_candidates_rate_limited", 7.0)
    assert failed.message == (
        "no candidate of t/chat could answer (1 of 2 attempted): local/m1: skipped (unsupported_n); "
        "cloud/c1: rate_limited [429], holding 7 s"
    )


def test_cannot_serve_is_no_upstream_error_and_names_its_field() -> None:
    refusal = errors.CannotServe(
        "remote image URLs are not fetched", param="messages[2].content[0].image_url"
    )
    assert not isinstance(refusal, errors.UpstreamError | errors.GatewayError)
    assert (refusal.param, refusal.reason) == ("messages[2].content[0].image_url", "unsupported_messages")
