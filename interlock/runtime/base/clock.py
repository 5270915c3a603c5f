"""Clocks and time stamps: the injected clock type, ISO 8601 UTC, and a writer's millisecond clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], float]


def iso_utc(epoch: float | None) -> str | None:
    """Epoch seconds as ISO 8601 UTC with milliseconds (``...T05:34:33.324Z``); None stays None."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class MillisClock:
    """ISO 8601 UTC with milliseconds, formatting the date and time once per second (one per writer:
    the access log's, the audit log's)."""

    __slots__ = ("prefix", "second")

    def __init__(self) -> None:
        self.second = -1
        self.prefix = ""

    def iso(self, epoch: float) -> str:
        second = int(epoch)
        if second != self.second:
            self.second = second
            self.prefix = (iso_utc(second) or "")[:-4]  # "...T05:34:33."
        return f"{self.prefix}{int((epoch - second) * 1000):03d}Z"
