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
    for cls in classes:
        exc = cls("what happened", retry_after=2.0) if cls is errors.SlotUnavailable else cls("what happened")
        status, payload, _ = describe_error(exc, basic_plan)
        body = orjson.loads(payload)["error"]
        assert (status, body["type"], body["code"], body["message"]) == (
            cls.status,
            cls.type,
            cls.code,
            "what happened",
        ), cls


def test_cannot_serve_is_no_upstream_error_and_names_its_field() -> None:
    refusal = errors.CannotServe(
        "remote image URLs are not fetched", param="messages[2].content[0].image_url"
    )
    assert not isinstance(refusal, errors.UpstreamError | errors.GatewayError)
    assert (refusal.param, refusal.reason) == ("messages[2].content[0].image_url", "unsupported_messages")
