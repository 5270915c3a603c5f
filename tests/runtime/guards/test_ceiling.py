"""The output ceiling: the largest limit that fits, written into every output key of every wire format."""

from __future__ import annotations

import pytest

from interlock.runtime.guards.ceiling import MIN_CEILING, fitting, lowered, lowered_native
from interlock.runtime.wire.base import Native


def test_the_ceiling_is_the_window_less_the_prompt_with_the_margin_on_the_whole() -> None:
    assert fitting(8192, 6, 15) == 8192 * 100 // 115 - 6
    assert fitting(8192, 0, 0) == 8192
    assert fitting(8192, 8192 - MIN_CEILING + 1, 0) is None  # less room than a useful answer


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ({"max_tokens": 32000}, "max_tokens"),  # Anthropic Messages, OpenAI chat
        ({"max_completion_tokens": 32000}, "max_completion_tokens"),
        ({"max_output_tokens": 32000}, "max_output_tokens"),  # OpenAI Responses
        ({"num_predict": 32000}, "num_predict"),  # LiteLLM's top-level Ollama option
    ],
)
def test_every_output_key_above_the_ceiling_is_lowered(body: dict[str, int], key: str) -> None:
    sent = lowered({"messages": [], **body}, 4000)
    assert sent is not None
    assert sent[key] == 4000
    assert body[key] == 32000  # the caller's own body is never changed


def test_ollama_options_are_lowered_and_a_limit_within_the_ceiling_stays() -> None:
    body = {"options": {"num_predict": 9000, "temperature": 0.2}, "max_tokens": 100}
    sent = lowered(body, 4000)
    assert sent == {"options": {"num_predict": 4000, "temperature": 0.2}, "max_tokens": 100}
    assert lowered({"max_tokens": 100}, 4000) is None
    assert lowered({"messages": []}, 4000) is None  # no limit asked: sent as it came


def test_a_relayed_request_in_its_own_format_is_lowered_the_same_way() -> None:
    native = Native("anthropic", {"max_tokens": 32000, "messages": []}, {"anthropic-version": "2023-06-01"})
    sent = lowered_native(native, 7118)
    assert sent.body["max_tokens"] == 7118
    assert sent.headers == native.headers
    assert lowered_native(Native("anthropic", {"max_tokens": 10}), 7118).body == {"max_tokens": 10}
