"""Prometheus's text exposition format, read lean: only the samples of the metric names asked for.

A vLLM or SGLang ``/metrics`` answer is mostly histogram buckets (tens of kilobytes); the load signals
need three or four gauges of it. So each line is looked at only as far as its name: a comment, or a
name not asked for, is skipped before its labels or value are parsed. What is kept per name is every
sample's value (one per label set: a vLLM server with several engines reports one each), labels as
their raw text. A value that is not a number (Prometheus's own ``NaN``, ``+Inf`` parse as floats)
drops that sample only. ``tests/runtime/fleet/test_signals.py`` holds this reader to ``prometheus_client``'s
parser on every fixture.
"""

from __future__ import annotations

import math
from collections.abc import Collection


def samples(text: str, names: Collection[str]) -> dict[str, list[float]]:
    """``name -> [value of each sample]`` for the ``names`` present in ``text``; finite values only."""
    found: dict[str, list[float]] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        space = line.find(" ")
        end = brace if brace >= 0 and (space < 0 or brace < space) else space
        if end <= 0:
            continue
        name = line[:end]
        if name not in names:
            continue
        rest = line[line.rfind("}") + 1 :] if end == brace else line[end:]
        fields = rest.split()
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        if math.isfinite(value):
            found.setdefault(name, []).append(value)
    return found
