"""The count book: after one answer the same traffic is counted as the server counted it, the error goes to
the part of the prompt that made it, and an upstream that truncates silently cannot talk it down.

The figures are a real llama-server's (SmolLM2-135M, whose chat template drops tool schemas and adds a
default system prompt): ``tests/fixtures/clients/answers/llama_server_counts.json``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest

from interlock.runtime.books.estimate import Needs, needs_of
from interlock.runtime.books.learned import (
    REPORTING_FLOOR,
    TRIAL_EVERY_S,
    TRUNCATING_FLOOR,
    CountBook,
    ceiling,
)
from interlock.runtime.loaded.tables import PreflightSettings
from interlock.runtime.request.route_table import rows

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "clients"
SETTINGS = PreflightSettings("enforce", 600, None, None, 0, 0, 0, True)
ANSWERS: list[dict[str, Any]] = orjson.loads(
    (FIXTURES / "answers" / "llama_server_counts.json").read_bytes()
)["answers"]


def _needs(recording: str) -> Needs:
    record = orjson.loads((FIXTURES / recording).read_bytes())
    surface = {row.path: row.surface for row in rows() if row.metered}[record["path"]]
    return needs_of(surface.parse(copy.deepcopy(record["body"])).body, "chat", SETTINGS)


def _counted(usage: dict[str, Any]) -> int:
    if "prompt_tokens" in usage:
        return int(usage["prompt_tokens"])
    return int(usage["input_tokens"]) + int(usage.get("cache_read_input_tokens") or 0)


def _parts(needs: Needs) -> tuple[int, int]:
    return needs.prompt_tokens - needs.schema_tokens, needs.schema_tokens


@pytest.mark.parametrize("answer", ANSWERS, ids=lambda a: f"{a['recording']}->{a['sent']}")
def test_after_one_answer_the_same_request_is_counted_within_15_percent(answer: dict[str, Any]) -> None:
    text, schema = _parts(_needs(answer["recording"]))
    counted = _counted(answer["usage"])
    book = CountBook()
    assert book.prompt("llama", "smol", text, schema, REPORTING_FLOOR) == text + schema  # nothing learned
    book.learn("llama", "smol", text, schema, counted)
    assert abs(book.prompt("llama", "smol", text, schema, REPORTING_FLOOR) / counted - 1) <= 0.15
    assert book.prompt("other", "smol", text, schema, REPORTING_FLOOR) == text + schema  # per endpoint


def test_a_template_that_drops_the_tools_moves_the_schema_part_not_the_text() -> None:
    """Claude Code's request: ~16k tokens of tool schemas the SmolLM2 template never renders."""
    (claude,) = [a for a in ANSWERS if a["recording"].startswith("claude") and a["sent"] == "/v1/messages"]
    text, schema = _parts(_needs(claude["recording"]))
    assert schema > 4 * text  # the schemas dominate the estimate
    book = CountBook()
    book.learn("llama", "smol", text, schema, _counted(claude["usage"]))
    learned = book.get("llama", "smol")
    assert learned is not None
    assert learned.samples == 1
    assert learned.schema < 0.2  # the schemas were mostly not counted
    assert learned.text > 0.7  # a text-only prompt is still counted near its estimate
    assert book.prompt("llama", "smol", 2000, 0, REPORTING_FLOOR) > 1400


def test_a_short_prompt_teaches_the_template_s_own_tokens() -> None:
    """Open WebUI's "Say hi.": 6 tokens by the estimate, 33 by the server (its default system prompt)."""
    book = CountBook()
    book.learn("llama", "smol", 6, 0, 33)
    learned = book.get("llama", "smol")
    assert learned is not None
    assert learned.template > 20
    assert learned.text < 1.25  # not a 5x text coefficient for every later prompt


def test_newer_answers_weigh_more() -> None:
    book = CountBook()
    for _ in range(3):
        book.learn("e", "m", 1000, 0, 2000)
    book.learn("e", "m", 1000, 0, 1000)
    assert 1000 <= book.prompt("e", "m", 1000, 0, REPORTING_FLOOR) < 1500


def test_a_truncating_upstream_never_goes_below_its_floor() -> None:
    """Ollama's prompt_eval_count leaves a cached prefix out: a tiny count must not shrink the estimate."""
    book = CountBook()
    book.learn("ollama@box", "qwen3:8b", 4000, 0, 40)
    assert book.prompt("ollama@box", "qwen3:8b", 4000, 0, TRUNCATING_FLOOR) >= 2000
    assert book.prompt("ollama@box", "qwen3:8b", 4000, 0, REPORTING_FLOOR) < 200


def test_counts_too_small_to_say_anything_are_not_learned() -> None:
    book = CountBook()
    book.learn("e", "m", 100, 0, 0)
    assert book.get("e", "m") is None


def test_the_book_is_bounded() -> None:
    book = CountBook(max_entries=2)
    for model in ("a", "b", "c"):
        book.learn("e", model, 100, 0, 120)
    assert book.get("e", "a") is None
    assert book.snapshot()["e"].keys() == {"b", "c"}


def test_the_coefficients_never_go_negative() -> None:
    """Two answers of different shapes put the unconstrained fit at ``schema: -0.10`` (issue 38 saw
    -0.587): a negative coefficient counts a longer prompt as shorter. Held at 0, the rest solved again."""
    book = CountBook()
    book.learn("e", "m", 500, 50, 700)
    book.learn("e", "m", 500, 3000, 400)
    learned = book.get("e", "m")
    assert learned is not None
    assert learned.text >= 0
    assert learned.schema >= 0
    assert book.prompt("e", "m", 500, 6000, REPORTING_FLOOR) >= book.prompt(
        "e", "m", 500, 3000, REPORTING_FLOOR
    )


def test_a_server_that_counts_a_short_prompt_below_the_estimate_never_counts_one_as_nothing() -> None:
    """A fake counting a prompt as its words (10 for an estimate of 22) put the template's part at -5.4:
    every later prompt of a few words was counted 0 tokens (count_tokens answered 0). No part of the
    fit goes below 0, and a prompt with any text is at least one token."""
    book = CountBook()
    book.learn("e", "m", 22, 0, 10)
    learned = book.get("e", "m")
    assert learned is not None
    assert learned.template >= 0
    assert learned.text >= 0
    assert book.prompt("e", "m", 3, 0, REPORTING_FLOOR) >= 1
    assert book.prompt("e", "m", 0, 0, REPORTING_FLOOR) == 0


def test_a_count_no_template_could_make_is_refused_where_it_enters() -> None:
    """Issue 39 defect 5: 100,000 tokens for a 20-token prompt."""
    book = CountBook()
    book.learn("e", "m", 20, 0, 100_000)
    assert book.get("e", "m") is None
    book.learn("e", "m", 20, 0, ceiling(20))  # the most a server may add is still learned
    assert book.get("e", "m") is not None


def test_what_is_learned_counts_a_prompt_at_most_its_ceiling() -> None:
    """One answer at the border ("say hi" counted 2,000) fits a large text coefficient; a long prompt is
    still counted no higher than the border allows."""
    book = CountBook()
    book.learn("e", "m", 6, 0, 2_000)
    assert book.prompt("e", "m", 5_000, 0, REPORTING_FLOOR) == ceiling(5_000)


def test_a_candidate_locked_out_by_what_was_learned_is_tried_once_a_minute() -> None:
    now = [100.0]
    book = CountBook(clock=lambda: now[0])
    assert book.trial("e", "m")
    now[0] += TRIAL_EVERY_S - 1
    assert not book.trial("e", "m")
    now[0] += 1
    assert book.trial("e", "m")
    assert book.trial("other", "m")
    book.mark("w", "m")  # a window its server named just now: the first trial waits too
    assert not book.trial("w", "m")
