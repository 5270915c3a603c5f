"""Fallback semantics through a real `interlock serve`, driven by the real openai SDK."""

from __future__ import annotations

import re

import openai
import pytest

from interlock.testing.fake_server import FakeServer
from interlock.testing.faults import Fault
from tests.e2e.conftest import SECRETS, Fakes
from tests.e2e.harness import Served
from tests.waiting import wait_until

HI = [{"role": "user", "content": "hi"}]


def client(gateway: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="caller-key", max_retries=0)


def chat_paths(fake: FakeServer, model: str) -> int:
    return sum(1 for r in fake.requests if isinstance(r.body, dict) and r.body.get("model") == model)


def test_the_primary_answers_and_the_headers_say_so(gateway: Served, fakes: Fakes) -> None:
    raw = client(gateway).chat.completions.with_raw_response.create(model="e2e/default", messages=HI)
    completion = raw.parse()
    assert raw.headers["x-interlock-resolved"] == "box/llama3.2:3b"
    assert raw.headers["x-interlock-alias"] == "e2e/default"
    assert raw.headers["x-interlock-plan"] == gateway.health()["plan"]["content_hash"]
    assert completion.model == "box/llama3.2:3b"
    assert completion.choices[0].message.content == "Hello from box, model llama3.2:3b."


def test_a_refusing_primary_falls_back(gateway: Served, fakes: Fakes) -> None:
    raw = client(gateway).chat.completions.with_raw_response.create(model="e2e/refuse", messages=HI)
    assert raw.headers["x-interlock-resolved"] == "alpha/a-refuse"
    assert raw.parse().model == "alpha/a-refuse"
    assert (  # `connect`: refused and moved on at once, not `connect_timeout` (no timeout waited out)
        gateway.metric(
            "interlock_fallback_total",
            from_candidate="dead/llama3.2:3b",
            to_candidate="alpha/a-refuse",
            reason="connect",
        )
        == 1
    )


def test_a_primary_that_never_answers_costs_one_first_byte_timeout_once(
    gateway: Served, fakes: Fakes
) -> None:
    fakes.hang.set_fault(Fault.hang(), model="h-slow")
    sdk = client(gateway)
    raw = sdk.chat.completions.with_raw_response.create(model="e2e/hang", messages=HI)
    assert raw.headers["x-interlock-resolved"] == "bravo/b-after-hang"
    moved = {"from_candidate": "hang/h-slow", "to_candidate": "bravo/b-after-hang"}
    # the first_byte deadline (1 s) ended the wait, not the total one (5 s): the reason says which fired
    assert gateway.metric("interlock_fallback_total", **moved, reason="first_byte_timeout") == 1
    raw = sdk.chat.completions.with_raw_response.create(model="e2e/hang", messages=HI)
    assert raw.headers["x-interlock-resolved"] == "bravo/b-after-hang"
    assert chat_paths(fakes.hang, "h-slow") == 1  # the second request did not wait on it again
    assert (
        gateway.metric(
            "interlock_fallback_total",
            from_candidate="hang/h-slow",
            to_candidate="bravo/b-after-hang",
            reason="circuit_open",
        )
        == 1
    )
    assert gateway.health()["candidates"]["hang/h-slow"]["last_error_class"] == "first_byte_timeout"


def test_a_400_from_the_primary_is_returned_and_not_retried(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.set_fault(Fault.http_status(400, "max_tokens is too large for this model"), model="a-400")
    with pytest.raises(openai.BadRequestError) as info:
        client(gateway).chat.completions.create(model="e2e/badreq", messages=HI)
    assert info.value.body == {
        "message": "upstream alpha/a-400 answered 400: max_tokens is too large for this model",
        "type": "invalid_request_error",
        "param": None,
        "code": "upstream_error",
    }
    assert info.value.response.headers["x-interlock-resolved"] == "alpha/a-400"
    assert chat_paths(fakes.bravo, "b-400") == 0


def test_a_malformed_answer_falls_back_and_counts_towards_the_circuit(gateway: Served, fakes: Fakes) -> None:
    """A 200 that is not JSON is an upstream failure (issue 40 item 5): the fallback answers, the
    primary is not asked again for it, and the failure counts (failure_threshold 1: its circuit opens)."""
    fakes.alpha.set_fault(Fault.malformed(), model="a-malformed")
    before = gateway.metric(
        "interlock_upstream_errors_total", candidate="alpha/a-malformed", error_class="malformed"
    )
    raw = client(gateway).chat.completions.with_raw_response.create(model="e2e/malformed", messages=HI)
    assert raw.headers["x-interlock-resolved"] == "bravo/b-malformed"
    assert raw.parse().choices[0].message.content == "Hello from bravo, model b-malformed."
    assert chat_paths(fakes.alpha, "a-malformed") == 1  # not retried: a server answering garbage does again
    assert chat_paths(fakes.bravo, "b-malformed") == 1
    after = gateway.metric(
        "interlock_upstream_errors_total", candidate="alpha/a-malformed", error_class="malformed"
    )
    assert after == before + 1
    report = gateway.health()["candidates"]["alpha/a-malformed"]
    assert report["last_error_class"] == "malformed"
    assert report["circuit_open_until"] is not None


def test_all_down_is_a_503_summary_without_bodies(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.set_fault(Fault.http_status(500, "secret stack trace from alpha"), model="a-500")
    fakes.bravo.set_fault(Fault.http_status(502, "<html>cloudflare secret page</html>"), model="b-502")
    fakes.hang.set_fault(Fault.disconnect(), model="h-drop")
    with pytest.raises(openai.InternalServerError) as info:
        client(gateway).chat.completions.create(model="e2e/alldown", messages=HI)
    assert info.value.status_code == 503
    body = info.value.body
    assert isinstance(body, dict)
    message = body.pop("message")
    assert body == {"type": "server_error", "param": None, "code": "all_candidates_failed"}
    # failure_threshold 1: every circuit opened, for its first half-open period (an eighth of open_for,
    # 60 s, jittered down by up to a quarter: 6 to 8 s, told rounded up)
    assert re.fullmatch(
        r"no candidate of e2e/alldown could answer \(3 of 3 attempted\): "
        r"alpha/a-500: server_error \[500\], circuit open for [678] s; bravo/b-502: server_error \[502\], "
        r"circuit open for [678] s; hang/h-drop: protocol, circuit open for [678] s",
        message,
    ), message
    assert info.value.response.headers["retry-after"] in {"6", "7", "8"}
    text = info.value.response.text
    assert "secret" not in text
    assert not any(s in text for s in SECRETS)


def test_a_429_moves_on_and_holds_the_candidate_for_retry_after(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.set_fault(Fault.rate_limited("20"), model="a-429")
    raw = client(gateway).chat.completions.with_raw_response.create(model="e2e/limited", messages=HI)
    assert raw.headers["x-interlock-resolved"] == "bravo/b-429"
    report = gateway.health()["candidates"]["alpha/a-429"]
    assert (report["last_error_class"], report["last_error_status"], report["healthy"]) == (
        "rate_limited",
        429,
        False,
    )
    assert report["consecutive_failures"] == 0  # counted apart from the failure streak
    assert gateway.metric("interlock_circuit_open", candidate="alpha/a-429") == 1
    client(gateway).chat.completions.create(model="e2e/limited", messages=HI)
    assert chat_paths(fakes.alpha, "a-429") == 1


def test_a_dead_primary_found_by_probes_is_skipped_on_the_first_request(
    gateway: Served, fakes: Fakes
) -> None:
    fakes.gone.refuse_connections()
    wait_until(lambda: not gateway.health()["providers"]["gone"]["healthy"], 60, "probes to notice gone-box")
    assert gateway.health()["workers"]["gone-box"]["healthy"] is False
    assert gateway.metric("interlock_provider_healthy", provider="gone") == 0
    raw = client(gateway).chat.completions.with_raw_response.create(model="e2e/gone", messages=HI)
    assert raw.headers["x-interlock-resolved"] == "bravo/b-gone"
    assert (
        gateway.metric(
            "interlock_fallback_total",
            from_candidate="gone/llama3.2:3b",
            to_candidate="bravo/b-gone",
            reason="unhealthy",
        )
        == 1
    )
    assert (
        gateway.metric("interlock_fallback_total", from_candidate="gone/llama3.2:3b", reason="connect") == 0
    )
    fakes.gone.accept_connections()
    wait_until(lambda: gateway.health()["providers"]["gone"]["healthy"], 60, "probes to see gone-box again")
    raw = client(gateway).chat.completions.with_raw_response.create(model="e2e/gone", messages=HI)
    assert raw.headers["x-interlock-resolved"] == "gone/llama3.2:3b"


def test_names_resolve_like_the_plan_says(gateway: Served, fakes: Fakes) -> None:
    sdk = client(gateway)
    with pytest.raises(openai.NotFoundError) as info:
        sdk.chat.completions.create(model="e2e/nope", messages=HI)
    assert info.value.body["message"].startswith("`e2e/nope` is not an alias; aliases: e2e/alldown, ")  # type: ignore[index]
    assert info.value.body["code"] == "model_not_found"  # type: ignore[index]
    raw = sdk.chat.completions.with_raw_response.create(model="bravo/anything-goes", messages=HI)
    assert raw.headers["x-interlock-resolved"] == "bravo/anything-goes"
    assert raw.parse().model == "bravo/anything-goes"
    without_model = gateway.http.post("/v1/chat/completions", json={"messages": HI})
    assert without_model.status_code == 200
    assert without_model.headers["x-interlock-alias"] == "e2e/default"
