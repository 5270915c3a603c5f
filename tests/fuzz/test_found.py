"""What fuzzing found, one regression test each: every one was a 500 (or an invalid request accepted,
or an answer that broke its own schema) before it was fixed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.harness import Served

HI = [{"role": "user", "content": "hi"}]


def post(gateway: Served, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    answer = gateway.http.post(path, json=body)
    assert answer.headers["content-type"].startswith("application/json"), answer.text
    return answer.status_code, answer.json()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/chat", {"messages": HI, "stream": False}),
        ("/api/generate", {"prompt": "hi", "stream": False}),
        ("/api/embed", {"input": "hi"}),
        ("/v1/responses", {"input": "hi"}),
        ("/v1/messages", {"max_tokens": 8, "messages": HI}),
    ],
)
def test_an_answer_to_a_request_without_a_model_names_the_default_alias(
    fuzzed: Served, path: str, body: dict[str, Any]
) -> None:
    status, answer = post(fuzzed, path, body)  # was `"model": null`, which no client expects
    assert (status, answer["model"]) == (200, "fuzz/chat")


def test_ollama_tool_calls_that_are_not_an_array_are_refused(fuzzed: Served) -> None:
    messages = [{"role": "assistant", "content": "x", "tool_calls": 5}, *HI]
    assert post(fuzzed, "/api/chat", {"messages": messages, "stream": False}) == (
        400,
        {"error": "`messages[0].tool_calls` must be an array"},
    )  # was a plain-text 500 (the surface iterated over the number)


def test_ollama_images_that_are_not_an_array_are_refused_even_when_falsy(fuzzed: Served) -> None:
    assert post(fuzzed, "/api/generate", {"prompt": "hi", "images": 0, "stream": False}) == (
        400,
        {"error": "`messages[0].images` must be an array of base64 strings"},
    )  # was accepted (a falsy `images` skipped the check)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"stop": 5}, "`stop` must be a string or an array of strings"),
        ({"tools": 5}, "`tools` must be an array"),
        (
            {"messages": [{"role": "assistant", "content": "x", "tool_calls": [5]}, *HI]},
            "`tool_calls` must be an array of objects",
        ),
        (
            {"messages": [{"role": "assistant", "content": "x", "tool_calls": [{"id": "c"}]}, *HI]},
            "every tool call needs a `function` object",
        ),
    ],
)
def test_fields_the_anthropic_adapter_cannot_translate_are_refused(
    fuzzed: Served, extra: dict[str, Any], message: str
) -> None:
    body = {"model": "fuzz/claude", "messages": HI, **extra}
    status, answer = post(fuzzed, "/v1/chat/completions", body)  # each was a 500
    assert (status, answer["error"]["message"], answer["error"]["type"]) == (
        400,
        message,
        "invalid_request_error",
    )


def test_ollama_options_stop_to_anthropic_is_refused(fuzzed: Served) -> None:
    body = {"model": "fuzz/claude", "messages": HI, "stream": False, "options": {"stop": 5}}
    assert post(fuzzed, "/api/chat", body) == (
        400,
        {"error": "`stop` must be a string or an array of strings"},
    )


def test_a_system_text_that_is_not_a_string_is_left_out_for_anthropic(fuzzed: Served) -> None:
    messages = [
        {"role": "system", "content": [{"type": "text", "text": 5}, {"type": "text", "text": "be brief"}]},
        *HI,
    ]
    status, _ = post(fuzzed, "/v1/chat/completions", {"model": "fuzz/claude", "messages": messages})
    assert status == 200  # was a 500 (joining a number)


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_an_anthropic_text_block_that_is_not_a_string_is_refused(fuzzed: Served, path: str) -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": 5}]}]
    assert post(fuzzed, path, {"model": "fuzz/chat", "max_tokens": 8, "messages": messages}) == (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "`messages[0].content[0].text` must be a string",
            },
        },
    )


def test_an_anthropic_tool_result_text_that_is_not_a_string_is_left_out(fuzzed: Served) -> None:
    content = [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": 5}]}]
    body = {"model": "fuzz/chat", "max_tokens": 8, "messages": [{"role": "user", "content": content}]}
    assert post(fuzzed, "/v1/messages/count_tokens", body)[0] == 200  # was a 500


def test_a_responses_text_part_that_is_not_a_string_is_refused(fuzzed: Served) -> None:
    item = {"role": "user", "content": [{"type": "input_text", "text": 5}]}
    status, answer = post(fuzzed, "/v1/responses", {"model": "fuzz/chat", "input": [item]})
    assert (status, answer["error"]["message"]) == (400, "`input[0].content[0].text` must be a string")


def test_an_anthropic_thinking_block_that_is_not_a_string_is_refused(fuzzed: Served) -> None:
    messages = [{"role": "assistant", "content": [{"type": "thinking", "thinking": 5}]}, *HI]
    assert post(fuzzed, "/v1/messages", {"model": "fuzz/chat", "max_tokens": 8, "messages": messages}) == (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "`messages[0].content[0].thinking` must be a string",
            },
        },
    )  # was a 500 (joining a number)


def test_an_ollama_message_content_that_is_not_a_string_is_refused_even_when_falsy(fuzzed: Served) -> None:
    messages = [{"role": "user", "content": []}]
    assert post(fuzzed, "/api/chat", {"messages": messages, "stream": False}) == (
        400,
        {"error": "`messages[0].content` must be a string"},
    )  # was accepted as an empty message (found with seed 11, 100 cases)
