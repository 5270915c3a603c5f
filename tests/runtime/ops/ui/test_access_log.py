"""`--access-log json`: one JSON object a line per request, with the request id the caller got back in
`X-Request-Id`; metadata only (never a prompt, an answer or a credential)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from interlock.testing.faults import Fault
from tests.runtime.ops.ui.conftest import CLOUD_KEY, Fleet, _fleet
from tests.waiting import wait_until

CANARY = "PROMPT-CANARY-4b1e"
FIELDS = {
    "time", "request_id", "surface", "endpoint", "stream", "alias", "candidate", "worker", "attempts",
    "status", "error_class", "duration_ms", "tokens", "key", "tenant",
}  # fmt: skip


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    yield from _fleet(tmp_path_factory.mktemp("access-log-fleet"), "--access-log", "json")


def lines(fleet: Fleet) -> list[dict[str, Any]]:
    return [json.loads(line) for line in fleet.served.log().splitlines() if line.startswith("{")]


def line_for(fleet: Fleet, rid: str) -> dict[str, Any]:
    wait_until(lambda: any(x["request_id"] == rid for x in lines(fleet)), 60, f"the line of {rid}")
    return next(x for x in lines(fleet) if x["request_id"] == rid)


def post(fleet: Fleet, body: dict[str, Any], rid: str | None = None) -> httpx.Response:
    headers = {"x-request-id": rid} if rid is not None else {}
    with httpx.Client(base_url=fleet.served.url, timeout=30) as http:
        return http.post("/v1/chat/completions", json=body, headers=headers)


def chat(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": CANARY}], **extra}


def test_a_fallback_is_logged_with_its_attempts_durations_and_tokens(fleet: Fleet) -> None:
    fleet.gpu_b.refuse_connections()
    answer = post(fleet, chat("team/chat"), rid="order-42:retry.1")
    assert answer.status_code == 200
    assert answer.headers["x-request-id"] == "order-42:retry.1"
    line = line_for(fleet, "order-42:retry.1")
    assert set(line) == FIELDS
    assert (line["alias"], line["candidate"], line["worker"]) == ("team/chat", "box-a/llama3.2:3b", "gpu-a")
    refused = {"candidate": "box-b/llama3.2:3b", "error_class": "connect", "status": None, "called": True}
    assert line["attempts"] == [{**refused, "retry": 0}]  # its circuit opened (failure_threshold 1): no retry
    assert (line["status"], line["error_class"], line["stream"]) == (200, None, False)
    assert set(line["duration_ms"]) == {"total", "upstream", "queued", "relay", "overhead"}
    assert line["duration_ms"]["total"] >= line["duration_ms"]["upstream"] > 0
    assert line["tokens"]["completion_tokens"] > 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])
    fleet.gpu_b.accept_connections()


def test_errors_and_unusable_ids_are_logged_too(fleet: Fleet) -> None:
    answer = post(fleet, chat("team/nope"), rid="x" * 129)  # too long: replaced
    assert answer.status_code == 404
    rid = answer.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{24}", rid)
    line = line_for(fleet, rid)
    assert (line["status"], line["error_class"], line["alias"], line["candidate"]) == (
        404,
        "model_not_found",
        None,
        None,
    )
    streamed = post(fleet, chat("team/vision", stream=True))  # a fast upstream (gpu-a streams slowly)
    line = line_for(fleet, streamed.headers["x-request-id"])
    assert (line["status"], line["stream"]) == (200, True)
    assert line["tokens"]["completion_tokens"] > 0  # a stream's usage: the gateway asks its upstream for it


def test_nothing_secret_or_said_is_logged(fleet: Fleet) -> None:
    post(fleet, chat("team/chat"), rid="canary-check")
    line_for(fleet, "canary-check")
    log = fleet.served.log()
    assert CANARY not in log
    assert CLOUD_KEY not in log
    assert "Hello from" not in log  # no answer text either


def test_messages_and_responses_are_logged_with_their_own_surface_and_endpoint(fleet: Fleet) -> None:
    with httpx.Client(base_url=fleet.served.url, timeout=30) as http:
        messages = http.post(
            "/v1/messages",
            json={"model": "team/vision", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
        )
        responses = http.post("/v1/responses", json={"model": "team/vision", "input": "hi"})
    assert (messages.status_code, responses.status_code) == (200, 200)
    seen = [line_for(fleet, answer.headers["x-request-id"]) for answer in (messages, responses)]
    assert [(line["surface"], line["endpoint"]) for line in seen] == [
        ("anthropic", "messages"),
        ("responses", "responses"),
    ]


def test_a_served_streams_time_is_logged_in_parts_that_add_up(fleet: Fleet) -> None:
    """gpu-a sends its 30 words 0.15 s apart, through `interlock serve`: the line names the stream's
    candidate and its parts add up to the total. How long each part is, exactly, is checked on an
    injected clock in-process (tests/runtime/request/test_durations.py)."""
    fleet.gpu_b.refuse_connections()  # team/chat: box-b first; then box-a (gpu-a), streaming slowly
    try:
        streamed = post(fleet, chat("team/chat", stream=True))
    finally:
        fleet.gpu_b.accept_connections()
    line = line_for(fleet, streamed.headers["x-request-id"])
    assert (line["candidate"], line["stream"]) == ("box-a/llama3.2:3b", True)
    took = line["duration_ms"]
    assert took["relay"], took  # a stream's relay is a part of its own (its length: test_durations.py)
    parts = took["upstream"] + took["queued"] + took["relay"] + took["overhead"]
    assert took["total"] == pytest.approx(parts, abs=0.01)  # the parts add up: nothing counted twice


def test_a_caller_gone_mid_call_is_logged_with_its_candidate_and_the_time_upstream(fleet: Fleet) -> None:
    gate = threading.Event()
    for box in (fleet.gpu_a, fleet.gpu_b):
        box.set_fault(Fault.hold(gate), model="llama3.2:3b", times=1)
    try:
        with httpx.Client(base_url=fleet.served.url, timeout=1.0) as http, pytest.raises(httpx.ReadTimeout):
            http.post("/v1/chat/completions", json=chat("team/chat"), headers={"x-request-id": "gone-1"})
        line = line_for(fleet, "gone-1")
    finally:
        gate.set()
        for box in (fleet.gpu_a, fleet.gpu_b):
            box.clear_faults(model="llama3.2:3b")
    assert line["status"] == 499
    assert line["candidate"] in ("box-a/llama3.2:3b", "box-b/llama3.2:3b")
    assert line["duration_ms"]["upstream"] > 0
