"""Every gateway answer is mapped at the surface to its own status and code, never to a 500."""

from __future__ import annotations

from pathlib import Path

import orjson

from interlock.runtime.base import errors
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.surfaces.openai import describe_error
from tests.runtime.conftest import build


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


def test_the_one_scrubber_replaces_long_values_anywhere_and_short_ones_only_alone() -> None:
    """Issue 22: a one-character dummy key turned "maximum context" into
    "ma[redacted]imum conte[redacted]t"."""
    from interlock.runtime.base.errors import scrub

    text = "This model's maximum context length is 512 tokens; key x was refused"
    assert (
        scrub(text, ["x"]) == "This model's maximum context length is 512 tokens; key [redacted] was refused"
    )
    assert scrub("token=sk-live-0123456789 in sk-live-0123456789abc", ["sk-live-0123456789"]) == (
        "token=[redacted] in [redacted]abc"
    )
    assert scrub("a\n  b " + "y" * 300, [], limit=10) == "a b yyyyy…"


def test_serve_names_a_credential_too_short_to_scrub_inside_words(tmp_path: Path) -> None:
    from interlock.commands.serve import short_credentials
    from tests.runtime.conftest import BASIC, compile_text

    plan = build(compile_text(tmp_path, BASIC), {"CLOUD_KEY": "x"})
    assert short_credentials(plan.source, {"CLOUD_KEY": "x"}) == [
        "provider cloud: the credential in CLOUD_KEY is 1 characters long; error texts are scrubbed of "
        "credentials of 8 or more anywhere, of shorter ones only where they stand alone"
    ]
    assert short_credentials(plan.source, {"CLOUD_KEY": "sk-long-enough"}) == []
