"""The bounds on a request's head (its request line and header fields) and the answers past them.

A client's head is held in memory until it is complete, so it is bounded in bytes and in fields: past
either bound the gateway answers 431 and closes the connection, counted in
``interlock_connections_closed_total{reason="headers_too_large"}``. The byte bound is nginx's default
(``large_client_header_buffers 4 8k``: 32 KiB in all), the field bound Apache's (``LimitRequestFields
100``); what a real client sends (a few hundred bytes, a dozen fields; a bearer token of a few KiB) is far
below both. A request whose ``Host`` fields are not what HTTP/1.1 requires (RFC 9112 section 3.2: exactly
one in an HTTP/1.1 request, at most one in any) is answered 400 (``reason="invalid_host"``).
"""

from __future__ import annotations

from interlock.runtime.wire.openai_chat import error_body

MAX_HEAD_BYTES = 32768
"""A request line and its header fields together (names, values, 4 bytes of framing each)."""

MAX_HEADER_FIELDS = 100
"""Header fields in one request."""


class HeadRefused(Exception):
    """Raised in a parser callback to stop the parser: the connection answers ``refusal`` and closes."""


def canned(status: str, message: str, code: str, extra: bytes = b"") -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, with an OpenAI-shaped error body."""
    body = error_body(message, "invalid_request_error", code=code)
    head = b"HTTP/1.1 %b\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n"
    return head % (status.encode(), len(body)) + extra + b"\r\n" + body


HEAD_TOO_LARGE = canned(
    "431 Request Header Fields Too Large",
    f"the request's head is larger than this gateway takes ({MAX_HEAD_BYTES // 1024} KiB of request line "
    f"and header fields, at most {MAX_HEADER_FIELDS} fields)",
    "request_header_fields_too_large",
)
INVALID_HOST = canned(
    "400 Bad Request",
    "an HTTP/1.1 request needs exactly one Host header field (RFC 9112 section 3.2)",
    "invalid_host",
)
