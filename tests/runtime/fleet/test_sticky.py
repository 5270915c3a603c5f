"""Sticky sessions: the session digest (header, else the messages' head), and the LRU + idle TTL table."""

from __future__ import annotations

from interlock.runtime.fleet.sticky import StickyTable, session_key
from interlock.runtime.loaded.tables import StickySettings

SETTINGS = StickySettings(header=b"x-session-id", prefix_bytes=64, max_sessions=2, idle_ttl_s=10.0)


def body(*contents: str, system: str | None = None) -> dict[str, object]:
    messages: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
    for i, content in enumerate(contents):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": content})
    return {"messages": messages}


def test_later_turns_of_a_conversation_have_the_first_turns_key() -> None:
    one = session_key("p/m", None, body("hi", system="be brief"), 64)
    three = session_key("p/m", None, body("hi", "hello!", "and then?", system="be brief"), 64)
    assert one is not None
    assert one == three
    assert session_key("p/m", None, body("another"), 64) != one
    assert session_key("p/other", None, body("hi", system="be brief"), 64) != one  # scoped per model


def test_the_header_names_the_session_and_only_a_digest_is_kept() -> None:
    key = session_key("p/m", b"abc", body("anything"), 64)
    assert key == session_key("p/m", b"abc", body("something else"), 64)
    assert key is not None
    assert len(key) == 16
    assert b"abc" not in key
    assert session_key("p/m", None, {"messages": []}, 64) is None


def test_only_the_first_prefix_bytes_count() -> None:
    long_a, long_b = "x" * 100 + "a", "x" * 100 + "b"
    assert session_key("p/m", None, body(long_a), 64) == session_key("p/m", None, body(long_b), 64)


def test_the_table_is_an_lru_with_an_idle_ttl() -> None:
    now = [0.0]
    table = StickyTable(clock=lambda: now[0])
    table.pin(b"a", "w1", SETTINGS)
    table.pin(b"b", "w2", SETTINGS)
    assert table.worker(b"a", SETTINGS) == "w1"
    table.pin(b"c", "w1", SETTINGS)  # over max_sessions: the least recently pinned (`a`) goes
    assert (table.worker(b"a", SETTINGS), len(table)) == (None, 2)
    now[0] = 10.5
    assert table.worker(b"b", SETTINGS) is None  # idle past the TTL
    table.pin(b"c", "w2", SETTINGS)
    assert (table.worker(b"c", SETTINGS), table.repinned) == ("w2", 1)
