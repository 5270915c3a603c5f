"""The border's error mapping: every upstream client exception mapped, statuses, Retry-After, masking."""

from __future__ import annotations

import inspect
import time
from email.utils import formatdate

import httptools
import pytest

from interlock.runtime.base import errors
from interlock.runtime.base.errors import (
    ClientError,
    ConnectFailed,
    ConnectTimeout,
    ProtocolFailure,
    RateLimited,
    ServerError,
    UpstreamError,
)
from interlock.runtime.net import http_errors as transport_errors
from interlock.runtime.upstream.failures import CLIENT_EXCEPTIONS, EXCEPTION_MAP, map_exception
from interlock.runtime.wire.error_bodies import (
    credentials,
    error_for_object,
    error_for_status,
    retry_after,
    upstream_text,
)


def _client_exception_classes() -> set[type[BaseException]]:
    """Every exception class a transport can raise: its one tree (net/http_errors.py, HTTPError's subtree)
    and httptools' parser errors (HttpParserError's subtree, the module's exported classes)."""
    found: set[type[BaseException]] = set()
    for module in (transport_errors, httptools):
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException):
                found.add(value)
    stack: list[type[BaseException]] = [transport_errors.HTTPError, httptools.HttpParserError]
    while stack:
        cls = stack.pop()
        found.add(cls)
        stack.extend(cls.__subclasses__())
    return found


def test_every_client_exception_is_mapped_explicitly() -> None:
    classes = _client_exception_classes()
    assert len(classes) > 20
    unmapped = sorted(cls.__qualname__ for cls in classes if cls not in EXCEPTION_MAP)
    assert unmapped == []


def test_every_mapped_class_is_caught_by_the_adapters() -> None:
    assert EXCEPTION_MAP  # an empty table would let the loop below prove nothing
    for cls in EXCEPTION_MAP:
        assert issubclass(cls, CLIENT_EXCEPTIONS), cls


def test_every_target_is_an_upstream_error_with_a_short_message() -> None:
    leaves = {
        cls for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, UpstreamError)
    }
    assert EXCEPTION_MAP  # an empty table would let the loop below prove nothing
    for error_class, message in EXCEPTION_MAP.values():
        assert error_class in leaves
        assert error_class not in (UpstreamError, errors.TransientError, errors.DeterministicError)
        assert 0 < len(message) < 60


@pytest.mark.parametrize(
    ("exc", "error_class", "message"),
    [
        (transport_errors.ConnectError("refused"), ConnectFailed, "connection refused or unreachable"),
        (transport_errors.CertificateError("bad"), ConnectFailed, "TLS certificate rejected"),
        (transport_errors.ConnectTimeout("slow"), ConnectTimeout, "connect timed out"),
        (transport_errors.Disconnected("closed"), ProtocolFailure, "server disconnected"),
        (transport_errors.CutShort("cut"), ProtocolFailure, "response body cut short"),
        (transport_errors.HeadTooLarge("big"), ProtocolFailure, "response head too large"),
        (httptools.HttpParserInvalidStatusError("bad"), ProtocolFailure, "broken HTTP response"),
        (ConnectionResetError(104, "reset"), ProtocolFailure, "connection reset"),
    ],
)
def test_map_exception(exc: BaseException, error_class: type[UpstreamError], message: str) -> None:
    mapped = map_exception(exc)
    assert type(mapped) is error_class
    assert mapped.message == message


def test_mapped_messages_never_repeat_the_client_exceptions_text() -> None:
    exc = OSError(113, "No route to host (token=sk-abc123456)")
    assert "sk-abc" not in str(map_exception(exc))


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "9"}, 9.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after(headers) == expected


def test_retry_after_http_date() -> None:
    value = retry_after({"retry-after": formatdate(time.time() + 60, usegmt=True)})
    assert value is not None
    assert 55 <= value <= 61
    assert retry_after({"retry-after": formatdate(time.time() - 60, usegmt=True)}) == 0.0


def test_status_mapping() -> None:
    assert isinstance(error_for_status(429, {"retry-after": "2"}, b"", []), RateLimited)
    assert isinstance(error_for_status(503, {}, b"{}", []), ServerError)
    assert isinstance(error_for_status(524, {}, b"<html>", []), ServerError)
    redirect = error_for_status(301, {}, b"", [])
    assert isinstance(redirect, ProtocolFailure)
    assert redirect.message == "unexpected HTTP 301 (redirects are not followed)"
    html = error_for_status(404, {}, b"<html>Not Found</html>", [])
    assert isinstance(html, ClientError)
    assert html.message == "upstream refused the request (HTTP 404)"


def test_client_error_text_is_cut_collapsed_and_masked() -> None:
    key = "sk-live-0123456789abcdef"
    body = ('{"error": {"message": "bad\\n   key ' + key + " " + "x" * 400 + '"}}').encode()
    error = error_for_status(400, {}, body, credentials({"Authorization": f"Bearer {key}"}))
    assert isinstance(error, ClientError)
    assert error.status == 400
    assert error.message.startswith("bad key [redacted] xxx")
    assert len(error.message) == 300
    assert error.message.endswith("…")
    assert key not in error.message


def test_ollama_error_text() -> None:
    assert upstream_text(b'{"error": "model \\"x\\" not found, try pulling it first"}', []) == (
        'model "x" not found, try pulling it first'
    )
    assert upstream_text(b"[1, 2]", []) is None
    assert upstream_text(b"not json", []) is None


@pytest.mark.parametrize(
    ("error", "error_class", "status"),
    [
        ({"message": "overloaded", "type": "server_error", "code": 502}, ServerError, 502),
        ({"message": "slow down", "type": "rate_limit_error"}, RateLimited, 429),
        ({"message": "context too long", "type": "invalid_request_error", "code": "400"}, ClientError, 400),
        ("llama runner process has terminated", ServerError, None),
        ({"message": "odd"}, ServerError, None),
    ],
)
def test_error_objects_in_a_200(error: object, error_class: type[UpstreamError], status: int | None) -> None:
    mapped = error_for_object(error, [])
    assert type(mapped) is error_class
    assert mapped.status == status
