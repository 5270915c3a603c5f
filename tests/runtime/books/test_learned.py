"""The first-byte deadline stretched by the prompt's expected prefill (``Learned.deadline``): never shorter
than the prefill at the speed learned there, at most one grid step longer, and one copy of the endpoint
per step, not one per request."""

from __future__ import annotations

import pytest

from interlock.runtime.books.estimate import Needs
from interlock.runtime.books.learned import (
    MAX_PREFILL_S,
    MAX_PREFILL_TOKENS_PER_S,
    MIN_PREFILL_S,
    MIN_PREFILL_TOKENS_PER_S,
    STRETCH_STEP,
    Learned,
)
from interlock.runtime.wire.base import Endpoint

ENDPOINT = Endpoint(
    "llama", "openai", "http://127.0.0.1:9/v1", "llama", {"Authorization": "Bearer k"}, 1, 2, 30
)


def needs(prompt: int) -> Needs:
    return Needs(frozenset({"completion"}), prompt + 16, prompt, 0, 16, None, "none")


def test_before_any_speed_is_learned_and_for_a_short_prefill_the_endpoint_is_as_it_is() -> None:
    learned = Learned()
    assert learned.deadline(ENDPOINT, "smol", needs(50_000)) is ENDPOINT
    learned.prefill.record("llama", "smol", 1000.0)
    assert learned.deadline(ENDPOINT, "smol", needs(int(1000 * MIN_PREFILL_S) - 1)) is ENDPOINT


@pytest.mark.parametrize("prompt", [250, 251, 1_000, 3_027, 77_777, 10**6, 10**8])
def test_the_deadline_covers_the_prefill_and_at_most_one_step_more(prompt: int) -> None:
    learned = Learned()
    learned.prefill.record("llama", "smol", 1000.0)  # tokens/s
    stretched = learned.deadline(ENDPOINT, "smol", needs(prompt))
    prefill = min(prompt / 1000.0, MAX_PREFILL_S)
    extra = stretched.first_byte_s - ENDPOINT.first_byte_s
    assert prefill - 1e-9 <= extra <= min(prefill * STRETCH_STEP, MAX_PREFILL_S) + 1e-9
    assert (stretched.connect_s, stretched.total_s, stretched.lines) == (1, 30, ENDPOINT.lines)


def test_calls_whose_prefill_falls_in_one_step_share_one_copy_of_the_endpoint() -> None:
    learned = Learned()
    learned.prefill.record("llama", "smol", 1000.0)
    first = learned.deadline(ENDPOINT, "smol", needs(2_900))
    assert learned.deadline(ENDPOINT, "smol", needs(2_990)) is first  # 2.90 s and 2.99 s: one step
    assert learned.deadline(ENDPOINT, "smol", needs(3_300)) is not first  # 3.3 s: a later step
    other = Endpoint(
        "llama", "openai", "http://127.0.0.1:9/v1", "llama", {"Authorization": "Bearer k2"}, 1, 2, 30
    )
    again = learned.deadline(other, "smol", needs(2_900))  # a reload's endpoint: its own copy
    assert again is not first
    assert again.headers == {"Authorization": "Bearer k2"}


@pytest.mark.parametrize("claimed", [0.0, 1e-300, float("inf"), 1e300])
def test_a_learned_prompt_speed_is_bounded_where_it_enters(claimed: float) -> None:
    learned = Learned()
    learned.prefill.record("llama", "smol", claimed)
    rate = learned.prefill.learned("llama", "smol")
    assert rate is not None
    assert MIN_PREFILL_TOKENS_PER_S <= rate <= MAX_PREFILL_TOKENS_PER_S
    learned.prefill.record("llama", "nan", float("nan"))
    assert learned.prefill.learned("llama", "nan") is None
