"""What can be sent on the wire: header names, header values, and the headers the gateway owns.

One definition, imported by both sides of a border: the compiler reports a plan that breaks these rules
with a position (pass ``headers``, IL013), and the runtime refuses such a plan again when it loads it
(``interlock.runtime.loaded.plan``), because a plan file can be written by hand. The compiler may not import
the runtime, so the rule lives here, beside ``interlock.common.kinds``, where both can.
"""

from __future__ import annotations

import re

from interlock.common import words

HTTP_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 9110 `token`: what a header field name may be (use ``fullmatch``)."""

RESERVED_HEADERS = frozenset(
    words(
        """
        connection content-length content-type transfer-encoding cache-control x-accel-buffering
        retry-after retry-after-ms allow x-request-id x-interlock-alias x-interlock-plan
        x-interlock-worker x-interlock-skipped x-interlock-preflight x-interlock-dropped
        x-interlock-max-tokens x-interlock-counted
        """
    )
)
"""Response headers the gateway sets itself, which ``server.resolved_header`` may not be (lowercase)."""

MEANINGFUL_HEADERS = frozenset(
    words(
        """
        set-cookie set-cookie2 cookie location refresh link vary date server age expires etag
        last-modified pragma upgrade trailer te keep-alive host origin authorization www-authenticate
        strict-transport-security alt-svc clear-site-data accept-ranges timing-allow-origin
        x-frame-options x-content-type-options referrer-policy permissions-policy report-to nel
        """
    )
)
MEANINGFUL_PREFIXES = ("content-", "access-control-", "proxy-", "sec-", "cross-origin-", "x-forwarded-")
"""Response headers that mean something to browsers, caches or proxies (a cookie, a redirect, a CORS or
security policy, framing): ``server.resolved_header`` may not be one of them, nor start like them."""

MAX_NAME_CHARS = 256
"""The longest name (alias, model, provider, worker, chain entry) a plan may hold: each one may be sent
in every answer's headers, and a 200 KB one broke curl and the OpenAI SDK."""

_UNSENDABLE = re.compile(r"[\x00-\x1f\x7f]")
"""C0 controls and DEL: CR and LF would split the answer, the rest are refused by HTTP clients."""


def header_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent as an HTTP header value (None when it can): control characters
    (CR and LF would split the answer), whitespace at either end (receivers strip it), or more than
    ``MAX_NAME_CHARS`` characters."""
    if not value:
        return "it is empty"
    if len(value) > MAX_NAME_CHARS:
        return f"it is {len(value)} characters long, more than {MAX_NAME_CHARS}"
    if _UNSENDABLE.search(value):
        return "it holds a control character (CR, LF, NUL, tab, ...)"
    if value != value.strip():
        return "it starts or ends with whitespace"
    return None


def header_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the gateway's resolved-model header (None when it can)."""
    if not HTTP_TOKEN.fullmatch(name) or len(name) > MAX_NAME_CHARS:
        return "is not a valid HTTP header name"
    lower = name.lower()
    if lower in RESERVED_HEADERS:
        return "is a header the gateway sets itself"
    if lower in MEANINGFUL_HEADERS or lower.startswith(MEANINGFUL_PREFIXES):
        return "means something to browsers, caches or proxies"
    return None
