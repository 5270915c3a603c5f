"""Bad input gets a clear OpenAI-style error, and the gateway keeps serving."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from tests.e2e.harness import Served

HI = [{"role": "user", "content": "hi"}]


def error_of(response: object) -> dict[str, object]:
    body = response.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("content", "message", "param"),
    [
        (
            b"{not json",
            "the request body is not valid JSON "
            "(unexpected character, expected a string key: line 1 column 2 (char 1))",
            None,
        ),
        (b"[1, 2]", "the request body must be a JSON object, not an array", None),
        (b'{"model": "e2e/default"}', "`messages` is required", "messages"),
        (b'{"messages": "hi"}', "`messages` must be an array, not a string", "messages"),
        (b'{"messages": []}', "`messages` must hold at least one message", "messages"),
        (b'{"messages": ["hi"]}', "`messages[0]` must be an object, not a string", "messages[0]"),
        (b'{"messages": [{"content": "x"}]}', "`messages[0].role` must be a string", "messages[0].role"),
        (b'{"model": 7, "messages": [{"role": "user"}]}', "`model` must be a string, not a number", "model"),
        (b'{"model": "", "messages": [{"role": "user"}]}', "`model` must not be empty", "model"),
        (
            b'{"messages": [{"role": "user"}], "stream": "yes"}',
            "`stream` must be a boolean, not a string",
            "stream",
        ),
    ],
)
def test_bad_chat_requests_are_400(gateway: Served, content: bytes, message: str, param: str | None) -> None:
    response = gateway.http.post("/v1/chat/completions", content=content)
    assert response.status_code == 400
    error = error_of(response)
    assert error["message"] == message
    assert (error["type"], error["param"], error["code"]) == (
        "invalid_request_error",
        param,
        "invalid_request",
    )
    assert response.headers["x-interlock-plan"].startswith("sha256:")


def test_bad_embedding_requests_are_400(gateway: Served) -> None:
    response = gateway.http.post("/v1/embeddings", json={"model": "e2e/embed"})
    assert (response.status_code, error_of(response)["message"]) == (400, "`input` is required")


def test_a_body_over_the_limit_is_413_by_length_or_by_counting(gateway: Served) -> None:
    big = b'{"messages": [{"role": "user", "content": "' + b"x" * 70_000 + b'"}]}'
    response = gateway.http.post("/v1/chat/completions", content=big)
    assert response.status_code == 413
    assert error_of(response) == {
        "message": f"the request body is {len(big)} bytes; this gateway accepts at most 65536",
        "type": "invalid_request_error",
        "param": None,
        "code": "request_too_large",
    }

    def chunked() -> Iterator[bytes]:  # no Content-Length: the gateway counts while reading
        for start in range(0, len(big), 8192):
            yield big[start : start + 8192]

    response = gateway.http.post("/v1/chat/completions", content=chunked())
    assert response.status_code == 413
    assert (
        error_of(response)["message"] == "the request body is over 65536 bytes, the most this gateway accepts"
    )


def test_the_sdk_gets_typed_errors_and_the_gateway_keeps_serving(gateway: Served) -> None:
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError, match=r"`messages` must hold at least one message"):
        sdk.chat.completions.create(model="e2e/default", messages=[])
    assert sdk.chat.completions.create(model="e2e/default", messages=HI).model == "box/llama3.2:3b"


def test_unknown_paths_and_methods_use_the_openai_error_shape(gateway: Served) -> None:
    missing = gateway.http.get("/v1/nothing-here")
    assert (missing.status_code, error_of(missing)["type"]) == (404, "not_found_error")
    wrong_method = gateway.http.get("/v1/chat/completions")
    assert (wrong_method.status_code, error_of(wrong_method)["type"]) == (405, "invalid_request_error")
