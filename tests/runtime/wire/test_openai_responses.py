"""The Responses upstream side: a relayed stream's events read for metering, and where it must stop."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import orjson
import pytest

from interlock.runtime.base.errors import ProtocolFailure, ServerError
from interlock.runtime.wire import openai_responses
from interlock.runtime.wire.base import RelayedChunk, relayed_body
from tests.runtime.upstream.helpers import endpoint

ANSWERS = Path(__file__).resolve().parents[2] / "fixtures" / "clients" / "answers"


def _feed(decoder: openai_responses.EventDecoder, text: bytes) -> deque[dict[str, Any]]:
    out: deque[dict[str, Any]] = deque()
    for line in text.split(b"\n"):
        decoder.feed(line, out)
    return out


def test_every_event_is_relayed_and_the_text_and_usage_are_read() -> None:
    recorded = (ANSWERS / "openai_response_stream.sse").read_bytes()
    decoder = openai_responses.EventDecoder("gpt-4o", endpoint("openai", "http://x"))
    out = _feed(decoder, recorded)
    decoder.end(out)
    assert all(type(chunk) is RelayedChunk for chunk in out)
    assert (
        [c.native["type"] for c in out]
        == [  # type: ignore[attr-defined]
            orjson.loads(line[6:])["type"] for line in recorded.splitlines() if line.startswith(b"data: ")
        ]
    )
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in out if c.get("choices"))
    assert text == "A community garden opened today."
    last = out[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["usage"] == {
        "prompt_tokens": 328,
        "completion_tokens": 52,
        "total_tokens": 380,
        "prompt_tokens_details": {"cached_tokens": 256},
    }


def test_a_stream_cut_before_response_completed_is_a_protocol_failure() -> None:
    recorded = (ANSWERS / "openai_response_stream.sse").read_bytes()
    cut = recorded[: recorded.index(b"event: response.completed")]
    decoder = openai_responses.EventDecoder("gpt-4o", endpoint("openai", "http://x"))
    out = _feed(decoder, cut)
    with pytest.raises(ProtocolFailure, match=r"^stream ended before response\.completed$"):
        decoder.end(out)


def test_a_failed_response_raises_its_error() -> None:
    failed = {"type": "response.failed", "response": {"error": {"code": "server_error", "message": "boom"}}}
    decoder = openai_responses.EventDecoder("gpt-4o", endpoint("openai", "http://x"))
    with pytest.raises(ServerError):
        _feed(decoder, b"event: response.failed\ndata: " + orjson.dumps(failed) + b"\n\n")


def test_a_whole_answer_is_read_as_a_completion() -> None:
    answer = orjson.loads((ANSWERS / "openai_response.json").read_bytes())
    completion = openai_responses.completion_of(answer, "gpt-4o")
    assert completion["choices"][0]["message"]["content"] == "A community garden opened today."
    assert completion["usage"]["prompt_tokens_details"] == {"cached_tokens": 256}


def test_the_relayed_request_is_the_caller_s_but_for_model_and_stream() -> None:
    body = {"model": "cl/x", "input": "hi", "tools": [{"type": "web_search"}], "stream": True, "future": 1}
    assert relayed_body(body, "gpt-4o", stream=False) == {
        "model": "gpt-4o",
        "input": "hi",
        "tools": [{"type": "web_search"}],
        "future": 1,
    }
