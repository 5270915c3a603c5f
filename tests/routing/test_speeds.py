"""Learned speeds: the EWMA, its bounds, and the state file (atomic, foreign or corrupt -> warning)."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest

from interlock.runtime.speeds import SpeedBook, read_state, write_state

S = 1_000_000_000  # ns


def test_the_first_sample_is_taken_whole_then_smoothed() -> None:
    book = SpeedBook(smoothing=0.5)
    book.record("ollama@a", "m:latest", 100, 1 * S)
    assert book.get("ollama@a", "m:latest") == 100.0
    book.record("ollama@a", "m:latest", 300, 1 * S)
    assert book.get("ollama@a", "m:latest") == 200.0
    assert book.snapshot() == {"ollama@a": {"m:latest": {"tokens_per_s": 200.0, "samples": 2}}}


@pytest.mark.parametrize(
    ("count", "duration"), [(None, S), (100, None), (2, S), (100, 0), ("100", S), (100.0, S), (True, S)]
)
def test_unusable_figures_are_ignored(count: object, duration: object) -> None:
    book = SpeedBook()
    book.record("ollama@a", "m:latest", count, duration)
    assert book.get("ollama@a", "m:latest") is None
    assert not book.changed


def test_the_book_is_bounded_dropping_the_least_recently_updated() -> None:
    book = SpeedBook(max_entries=2)
    for model in ("a", "b", "c"):
        book.record("w", model, 10, S)
    assert [book.get("w", m) for m in ("a", "b", "c")] == [None, 10.0, 10.0]


def test_a_state_file_round_trips(tmp_path: Path) -> None:
    book = SpeedBook()
    book.record("ollama@a", "m:latest", 120, S)
    path = tmp_path / "deep" / "speeds.json"
    write_state(book, path)
    assert not book.changed
    assert [p.name for p in path.parent.iterdir()] == ["speeds.json"]  # no temporary file left
    again = SpeedBook()
    read_state(again, path)
    assert again.snapshot() == book.snapshot()


def test_a_missing_file_is_a_first_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    book = SpeedBook()
    read_state(book, tmp_path / "none.json")
    assert (book.snapshot(), caplog.records) == ({}, [])


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "is not valid JSON"),
        (b"[1, 2]", "not an interlock speeds file"),
        (orjson.dumps({"kind": "interlock-speeds", "version": 99, "speeds": []}), "version 99 is not 1"),
        (orjson.dumps({"kind": "interlock-speeds", "version": 1, "speeds": "x"}), "has no `speeds` list"),
        (
            orjson.dumps(
                {
                    "kind": "interlock-speeds",
                    "version": 1,
                    "speeds": [{"worker": "w", "model": "m", "tokens_per_s": -5}, "junk"],
                }
            ),
            "2 malformed speed entries ignored",
        ),
    ],
)
def test_a_foreign_or_corrupt_file_is_a_warning_never_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, says: str
) -> None:
    path = tmp_path / "speeds.json"
    path.write_bytes(content)
    book = SpeedBook()
    with caplog.at_level(logging.WARNING, logger="interlock.routing"):
        read_state(book, path)
    assert book.snapshot() == {}
    assert [says in r.getMessage() for r in caplog.records] == [True]
