"""An upstream's own error code reaches the caller in every surface's error body, beside interlock's class.

A caller branches on ``content_policy_violation`` or ``context_length_exceeded``; before, every 4xx an
upstream refused a request with was answered with the code ``upstream_error`` (the message was kept).
"""

from __future__ import annotations

import orjson
import pytest

from interlock.runtime.base.errors import ClientError
from interlock.runtime.books.record import CandidateRefused
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.surfaces.anthropic import Messages
from interlock.runtime.surfaces.base import failure_of
from interlock.runtime.surfaces.ollama import Chat
from interlock.runtime.surfaces.openai import ChatCompletions
from interlock.runtime.surfaces.responses import Responses
from interlock.runtime.wire.error_bodies import error_for_status

FILTERED = orjson.dumps(
    {
        "error": {
            "message": "Your request was rejected as a result of our safety system.",
            "type": "invalid_request_error",
            "param": None,
            "code": "content_policy_violation",
        }
    }
)


def refused(plan: RuntimePlan, status: int, body: bytes) -> CandidateRefused:
    error = error_for_status(status, {}, body, ())
    assert isinstance(error, ClientError)
    return CandidateRefused(plan.candidates["cloud/c1"], error)


def test_the_openai_shaped_surfaces_answer_the_upstreams_code_and_interlocks_class(
    basic_plan: RuntimePlan,
) -> None:
    failure = failure_of(refused(basic_plan, 400, FILTERED), basic_plan)
    for surface in (ChatCompletions(), Responses()):
        error = orjson.loads(surface.error(failure))["error"]
        assert (error["type"], error["code"], error["interlock_code"]) == (
            "invalid_request_error",
            "content_policy_violation",
            "upstream_error",
        )
        assert error["message"].startswith("upstream cloud/c1 answered 400: Your request was rejected")


def test_the_anthropic_surface_says_it_beside_its_own_error_type(basic_plan: RuntimePlan) -> None:
    failure = failure_of(refused(basic_plan, 400, FILTERED), basic_plan)
    body = orjson.loads(Messages().error(failure))
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert (body["error"]["code"], body["error"]["interlock_code"]) == (
        "content_policy_violation",
        "upstream_error",
    )


def test_ollamas_shape_has_only_its_message(basic_plan: RuntimePlan) -> None:
    failure = failure_of(refused(basic_plan, 400, FILTERED), basic_plan)
    assert set(orjson.loads(Chat().error(failure))) == {"error"}


@pytest.mark.parametrize(
    "body",
    [
        b'{"error": {"message": "bad", "type": "BadRequestError", "code": 400}}',  # vLLM: the status again
        b'{"error": {"message": "bad", "code": "two words"}}',  # not a plain name: not passed on
        b'{"error": "model \\"x\\" not found"}',  # Ollama: no code at all
        b"<html>no JSON</html>",
    ],
)
def test_without_a_plain_code_the_class_is_interlocks_own(basic_plan: RuntimePlan, body: bytes) -> None:
    failure = failure_of(refused(basic_plan, 400, body), basic_plan)
    error = orjson.loads(ChatCompletions().error(failure))["error"]
    assert error["code"] == "upstream_error"
    assert "interlock_code" not in error


def test_a_refused_credential_is_never_passed_off_as_the_callers(basic_plan: RuntimePlan) -> None:
    error = {"message": "Incorrect API key", "type": "invalid_request_error", "code": "invalid_api_key"}
    body = orjson.dumps({"error": error})
    failure = failure_of(refused(basic_plan, 401, body), basic_plan)
    error = orjson.loads(ChatCompletions().error(failure))["error"]
    assert error["code"] == "upstream_error"  # the gateway's key was refused, not the caller's


def test_a_code_that_holds_the_gateways_key_is_not_passed_on(basic_plan: RuntimePlan) -> None:
    """The code is the upstream's text too: an upstream that echoes the key there (a plain name by its
    shape) is masked as its message is."""
    key = "sk-proj-gateways0wnKey123"
    body = orjson.dumps({"error": {"message": f"bad key {key}", "code": key}})
    error = error_for_status(400, {}, body, [key])
    assert isinstance(error, ClientError)
    assert error.code is None
    assert key not in error.message
