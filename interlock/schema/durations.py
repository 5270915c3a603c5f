"""Durations as operators write them (``500ms``, ``3s``, ``10m``, ``1h``), held as whole milliseconds."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema

DURATION_PATTERN = r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$"
_DURATION_RE = re.compile(DURATION_PATTERN)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def parse_duration(value: object) -> int:
    """``"1.5s"`` -> 1500. Bare numbers are refused: ``30`` could mean seconds or milliseconds."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError("a duration is written with a unit, like 500ms, 3s, 10m or 1h")
    match = _DURATION_RE.match(value)
    if match is None:
        raise ValueError("a duration is written with a unit, like 500ms, 3s, 10m or 1h")
    number, unit = match.groups()
    return round(float(number) * _UNIT_MS[unit])


def format_duration(ms: int) -> str:
    """The shortest exact spelling: 1500 -> ``1500ms``, 60000 -> ``1m``."""
    for unit in ("h", "m", "s"):
        size = _UNIT_MS[unit]
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


Duration = Annotated[
    int,
    BeforeValidator(parse_duration),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN, "examples": ["500ms", "3s", "10m"]}),
]
"""A source-side duration: a string with a unit, parsed to milliseconds."""
