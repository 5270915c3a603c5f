"""``wire.fields.limited``: the one writer of output limits, lowering (the context's ceiling) or clamping
(the credits' and rates' cut), never changing the body it was given."""

from __future__ import annotations

from typing import Any

from interlock.runtime.wire.fields import ANY_LIMIT, OUTPUT_LIMITS, limited


def test_lowering_leaves_what_is_no_count_above_the_ceiling_and_sets_nothing_new() -> None:
    body: dict[str, Any] = {"max_tokens": 9000, "options": {"num_predict": -1, "top_k": 3}}
    assert limited(body, ANY_LIMIT, 4000) == {"max_tokens": 4000, "options": {"num_predict": -1, "top_k": 3}}
    assert limited({"messages": []}, ANY_LIMIT, 4000) is None
    assert limited({"max_tokens": 4000, "max_output_tokens": "x"}, ANY_LIMIT, 4000) is None


def test_clamping_replaces_no_limit_and_sets_the_formats_first_field_where_none_is_set() -> None:
    options = {"num_predict": -1, "top_k": 3}
    body: dict[str, Any] = {"options": options}
    sent = limited(body, OUTPUT_LIMITS["ollama"], 500, clamp=True)
    assert sent == {"options": {"num_predict": 500, "top_k": 3}}
    assert body == {"options": options}  # the caller's, as it came
    assert options["num_predict"] == -1
    assert limited({}, OUTPUT_LIMITS["ollama"], 500, clamp=True) == {"options": {"num_predict": 500}}
    assert limited({"max_tokens": 10}, OUTPUT_LIMITS["openai"], 500, clamp=True) is None
    chat = OUTPUT_LIMITS["openai"]
    assert limited({"stream": True}, chat, 500, clamp=True) == {"stream": True, "max_tokens": 500}
