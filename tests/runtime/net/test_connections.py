"""The connection book's bookkeeping: who is evicted at the cap, and how often that is logged.

The protocol itself is exercised against a real `interlock serve` in tests/e2e/test_hostile.py; here
the clock is injected, so the warning's rate limit is checked without waiting.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics, StateView
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.net.connections import WARN_EVERY_S, ConnectionBook
from interlock.runtime.state.memory import MemorySlots


class Conn:
    """A connection as the book sees it: closing it is recorded, and it leaves the book."""

    def __init__(self, book: ConnectionBook, closed: list[tuple[str, str]], name: str) -> None:
        self.book, self.closed, self.name = book, closed, name

    def close_for(self, reason: str, answer: bytes = b"") -> None:
        self.closed.append((self.name, reason))
        self.book.forget(self)  # type: ignore[arg-type]


def test_at_the_cap_the_oldest_idle_connection_goes_and_the_warning_is_rate_limited(
    basic_plan: RuntimePlan, caplog: pytest.LogCaptureFixture
) -> None:
    now = [100.0]
    metrics = Metrics(StateView(lambda: basic_plan, HealthBook(basic_plan.health), MemorySlots()))
    book = ConnectionBook(lambda: SimpleNamespace(max_connections=2), metrics, clock=lambda: now[0])  # type: ignore[arg-type, return-value]
    closed: list[tuple[str, str]] = []
    conns: dict[str, Any] = {name: Conn(book, closed, name) for name in "abcdef"}
    caplog.set_level(logging.WARNING, "interlock.connections")

    assert book.admit(conns["a"])
    assert book.admit(conns["b"])
    book.idle[conns["a"]] = None
    book.idle[conns["b"]] = None
    del book.idle[conns["a"]]
    book.idle[conns["a"]] = None  # a answered a request since: b is now the oldest idle one
    assert book.admit(conns["c"])
    assert closed == [("b", "evicted")]
    assert book.admit(conns["d"])  # a is idle: it goes
    assert closed == [("b", "evicted"), ("a", "evicted")]
    assert book.admit(conns["e"]) is False  # c and d are busy: the new one is refused
    assert len(caplog.records) == 2  # one warning per outcome
    now[0] += WARN_EVERY_S / 2
    book.forget(conns["e"])
    assert book.admit(conns["f"]) is False
    assert len(caplog.records) == 2  # within the period: counted, not logged
    now[0] += WARN_EVERY_S
    book.forget(conns["f"])
    assert book.admit(conns["f"]) is False
    assert caplog.records[-1].getMessage() == (
        "connection limit reached (server.max_connections is 2): refused a new connection with 503, "
        "none is idle (1 more since the last warning)"
    )
    assert metrics.connections_open.value == 3
