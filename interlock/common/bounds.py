"""Bounds on the numbers a server's answer gives about its models: one definition each, applied where the
number enters (``interlock init --discover``'s probes, the runtime's live Ollama metadata), so nothing
behind that border (a configuration, the facts table, the guards) ever holds an absurd value.

A value out of bounds is refused (read as unknown), never clamped: a window of 10^5000 tokens says
nothing true about the model, and unknown never blocks a request.
"""

from __future__ import annotations

import re
from typing import Any

MAX_WINDOW_TOKENS = 1 << 30
"""A context window: 1,073,741,824 tokens, a hundred times the largest model's (10M) today."""

MAX_SLOTS = 4096
"""Requests one server says it runs at once (llama-server's slots)."""

MAX_MODEL_BYTES = 1 << 50
"""A model's size in memory or on disk: 1 PiB."""

MAX_DIGITS = 18
"""Digits of a number read from text (Ollama's ``num_ctx`` in ``parameters``): ``int()`` of 5,000 digits
raises, and of 4,000 takes milliseconds; 18 digits is past every bound here."""

_DIGITS = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")


def bounded(value: Any, high: int) -> int | None:
    """``value`` when it is an integer (not a bool) from 1 to ``high``, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= high:
        return value
    return None


def window(value: Any) -> int | None:
    """A context window in tokens, or None when ``value`` is not one (``MAX_WINDOW_TOKENS``)."""
    return bounded(value, MAX_WINDOW_TOKENS)


def window_text(text: str) -> int | None:
    """A window written as ASCII digits (``num_ctx 8192``), or None: other digits (``²``, ``٣``), more
    than ``MAX_DIGITS`` of them, zero or past ``MAX_WINDOW_TOKENS``."""
    return window(int(text)) if _DIGITS.fullmatch(text) else None
