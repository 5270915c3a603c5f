"""Learned speeds: the EWMA, its bounds, and the state file (atomic, foreign or corrupt -> warning)."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest

from interlock.runtime.fleet.speeds import SpeedBook, read_state, write_state

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


def test_load_times_come_from_load_duration_with_worker_and_fleet_fallbacks() -> None:
    book = SpeedBook()
    final = {"eval_count": 10, "eval_duration": 10**8, "total_duration": 3 * 10**9}
    book.observe("w1", "a:latest", {**final, "load_duration": 5_000_000})  # warm: a few ms, no load
    assert book.load_time("w1", "a:latest") is None
    book.observe("w1", "a:latest", {**final, "load_duration": 2 * 10**9})
    assert book.load_time("w1", "a:latest") == 2.0
    assert book.service("w1", "a:latest") == pytest.approx((2.995 + 1.0) / 2)  # the load is not service
    assert book.load_time("w1", "b:latest") == 2.0  # any model on w1
    assert book.load_time("w2", "a:latest") == 2.0  # any model anywhere
    book.record_load("w2", "c:latest", 10**9)  # a load seen before any speed sample of c on w2
    book.observe("w2", "c:latest", final)  # its first speed sample keeps the load seen before it
    book.record_load("w2", "d:latest", 4 * 10**9)
    assert book.load_time("w2", "c:latest") == 1.0
    again = SpeedBook()
    assert again.load(book.dump(), "test") == 2  # d has no speed sample: its load is not kept
    assert again.load_time("w1", "a:latest") == 2.0
    assert again.load_time("w1", "b:latest") == 2.0
