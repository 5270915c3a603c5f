"""What an upstream's answer says went wrong, in every dialect: a status, an error body, an error
object inside a 200 answer or stream, ``Retry-After``; read into ``interlock.runtime.base.errors`` classes.

Messages never hold a header, a credential or an upstream body; the one exception is ``ClientError``,
whose message is the upstream's own short error text (OpenAI ``error.message`` or Ollama ``error``),
cut to ``MAX_UPSTREAM_TEXT`` characters with the endpoint's credentials masked (``errors.scrub``, the one
scrubber).

One rule for context overflow, whoever says it (``overflow``): a 4xx (or an error object) whose code is
``context_length_exceeded`` (OpenAI, llama-cpp-python), whose type is ``exceed_context_size_error``
(llama.cpp's ``llama-server``), or whose text says the prompt is over the context ("maximum context
length" of OpenAI and vLLM, Ollama's "context length", Anthropic's "prompt is too long") is a
``ContextOverflow``, with the window and the prompt's size when the text names them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import orjson

from interlock.common.bounds import window as bounded_window
from interlock.common.bounds import window_text
from interlock.runtime.base.errors import (
    ClientError,
    ContextOverflow,
    ProtocolFailure,
    RateLimited,
    ServerError,
    UpstreamError,
    scrub,
)

MAX_UPSTREAM_TEXT = 300


def error_for_status(
    status: int, headers: Mapping[str, str], body: bytes, secrets: Iterable[str]
) -> UpstreamError:
    """A non-2xx answer: 429 -> RateLimited, other 4xx -> ClientError, 5xx -> ServerError."""
    if status == 429:
        return RateLimited("rate limited (HTTP 429)", retry_after=retry_after(headers))
    if 400 <= status < 500:
        parsed = _json(body)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if error is None and isinstance(parsed, dict) and "message" in parsed:
            error = parsed  # vLLM's error body is the error object itself
        return _refused(error, status, secrets)
    if status >= 500:
        error = ServerError(f"upstream server error (HTTP {status})", status=status)
        if status == 503:  # "come back then": the retry policy waits for it (``runtime.retry``)
            error.retry_after = retry_after(headers)
        return error
    return ProtocolFailure(f"unexpected HTTP {status} (redirects are not followed)", status=status)


def error_for_object(error: Any, secrets: Iterable[str]) -> UpstreamError:
    """The error for an error object inside a 200 answer or stream (OpenAI ``error``, Ollama ``error``)."""
    status: int | None = None
    kind = ""
    if isinstance(error, dict):
        code = error.get("code")
        if isinstance(code, int) and 400 <= code < 600:
            status = code
        elif isinstance(code, str) and code.isdigit() and 400 <= int(code) < 600:
            status = int(code)
        kind = str(error.get("type") or "")
    if status is None:
        status = _TYPE_STATUS.get(kind)
    if status == 429:
        return RateLimited("rate limited (error in response)")
    if status is not None and 400 <= status < 500:
        return _refused(error, status, secrets)
    if status is None:  # no status said: an overflow is still a 400
        overflowed = overflow(error, _clean(_error_text(error), secrets), 400)
        if overflowed is not None:
            return overflowed
    return ServerError("upstream reported an error in its response", status=status)


_TYPE_STATUS = {"rate_limit_error": 429, "invalid_request_error": 400, "authentication_error": 401}


def _refused(error: Any, status: int, secrets: Iterable[str]) -> UpstreamError:
    """A 4xx's error (object or text): ``ContextOverflow`` where it says so, else ``ClientError``."""
    text = _clean(_error_text(error), secrets)
    overflowed = overflow(error, text, status)
    if overflowed is not None:
        return overflowed
    code = error_code(error, secrets)
    return ClientError(text or f"upstream refused the request (HTTP {status})", status=status, code=code)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms``, else ``Retry-After`` (seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            ms = float(value)
        except ValueError:
            ms = -1.0
        if ms >= 0:
            return ms / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
        return max(0.0, seconds)
    return seconds if seconds >= 0 else None


def upstream_text(body: bytes, secrets: Iterable[str]) -> str | None:
    """The upstream's own error text from an error body, cut short and masked; None when there is none."""
    parsed = _json(body)
    if not isinstance(parsed, dict):
        return None
    return _clean(_error_text(parsed.get("error")), secrets) or None


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


_OVERFLOW_CODES = frozenset(
    {"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded"}
)
_OVERFLOW_TEXT = re.compile(
    r"maximum context length|context length|context window|context size|prompt is too long"
    r"|prompt too long|exceeds? (?:the )?(?:available )?context",
    re.IGNORECASE,
)
_WINDOW = (  # the context the upstream names, in its own words
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"context window of (\d+)", re.IGNORECASE),
    re.compile(r"context length \((\d+)\)", re.IGNORECASE),
    re.compile(r"> (\d+) maximum", re.IGNORECASE),
    re.compile(r"n_ctx[\"': =]+(\d+)", re.IGNORECASE),
)
_TOKENS = (  # the prompt's size as the upstream counted it
    re.compile(r"resulted in (\d+) tokens", re.IGNORECASE),
    re.compile(r"requested (\d+) tokens", re.IGNORECASE),
    re.compile(r"requested tokens \((\d+)\)", re.IGNORECASE),
    re.compile(r"too long: (\d+) tokens", re.IGNORECASE),
    re.compile(r"input length \((\d+) tokens\)", re.IGNORECASE),
)


def overflow(error: Any, text: str, status: int) -> ContextOverflow | None:
    """``ContextOverflow`` when an upstream's error (its object, its cleaned text) says the prompt is
    over the context, in any of the dialects the module docstring lists; else None."""
    fields = error if isinstance(error, dict) else {}
    code = str(fields.get("code") or "")
    kind = str(fields.get("type") or "")
    if code not in _OVERFLOW_CODES and kind not in _OVERFLOW_CODES and not _OVERFLOW_TEXT.search(text):
        return None
    # bounded where they enter (``interlock.common.bounds``): an absurd window would lock a candidate out
    # as too small, or put every later candidate below the request
    window = bounded_window(fields.get("n_ctx")) or _first(_WINDOW, text)
    tokens = bounded_window(fields.get("n_prompt_tokens")) or _first(_TOKENS, text)
    said = f" (context {window} tokens)" if window is not None else ""
    return ContextOverflow(
        f"the prompt is longer than the upstream's context{said}", status=status, window=window, tokens=tokens
    )


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found is not None:
            return window_text(found.group(1))  # bounded as a field is (and ``int()`` of few digits)
    return None


def credentials(headers: Mapping[str, str]) -> list[str]:
    """Values to mask in upstream text: every header value, and the token after ``Bearer``."""
    found: list[str] = []
    for value in headers.values():
        found.append(value)
        _, _, token = value.partition(" ")
        if token:
            found.append(token)
    return [v for v in found if v]


_PLAIN_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


def error_code(error: Any, secrets: Iterable[str] = ()) -> str | None:
    """An error object's own ``code`` (OpenAI's ``content_policy_violation``, ``context_length_exceeded``,
    ``invalid_api_key``), as the caller is told it: a plain name of up to 64 characters that holds none
    of ``secrets`` (a key fits the pattern: an upstream that echoes it there is masked like its text),
    else None (a number is the status again, as vLLM sends it; anything else is not passed on)."""
    code = error.get("code") if isinstance(error, dict) else None
    if not isinstance(code, str) or not _PLAIN_CODE.fullmatch(code):
        return None
    return code if scrub(code, secrets) == code else None


def _error_text(error: Any) -> str:
    if isinstance(error, str):
        return error
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return ""


def _clean(text: str, secrets: Iterable[str]) -> str:
    return scrub(text, secrets, MAX_UPSTREAM_TEXT)
