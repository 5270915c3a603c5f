"""What can be sent on the wire: header names, header values, and the headers the gateway owns.

One definition, imported by both sides of a border: the compiler reports a plan that breaks these rules
with a position (pass ``wire``, IL013), and the runtime refuses such a plan again when it loads it
(``interlock.runtime.plan``), because a plan file can be written by hand. The compiler may not import
the runtime, so the rule lives here, beside ``interlock.kinds``, where both can.
"""

from __future__ import annotations

import re

HTTP_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 9110 `token`: what a header field name may be (use ``fullmatch``)."""

RESERVED_HEADERS = frozenset(
    (
        "connection",
        "content-length",
        "content-type",
        "transfer-encoding",
        "cache-control",
        "x-accel-buffering",
        "retry-after",
        "allow",
        "x-interlock-alias",
        "x-interlock-plan",
        "x-interlock-worker",
    )
)
"""Response headers the gateway sets itself, which ``server.resolved_header`` may not be (lowercase)."""

_UNSENDABLE = re.compile(r"[\x00-\x1f\x7f]")
"""C0 controls and DEL: CR and LF would split the answer, the rest are refused by HTTP clients."""


def header_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent as an HTTP header value (None when it can): control characters
    (CR and LF would split the answer) or whitespace at either end (receivers strip it)."""
    if not value:
        return "it is empty"
    if _UNSENDABLE.search(value):
        return "it holds a control character (CR, LF, NUL, tab, ...)"
    if value != value.strip():
        return "it starts or ends with whitespace"
    return None
