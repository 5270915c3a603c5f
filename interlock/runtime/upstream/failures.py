"""The provider border's error mapping: every HTTP-client exception to our classes.

Like httpx's ``_exceptions.py``: one table maps each exception class of the client (runtime/upstream/http1.py,
httptools' parser, and asyncio/OS/ssl) to the most specific ``interlock.runtime.base.errors`` class, and
adapters ``raise map_exception(exc) from exc``. ``tests/runtime/upstream/test_failures.py`` walks http1's
and httptools' exception classes and fails when one is missing. What an upstream's answer says went
wrong (a status, an error object) is read by ``wire.error_bodies``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping

import httptools

from interlock.runtime.base.errors import (
    ConnectFailed,
    ConnectTimeout,
    ProtocolFailure,
    TotalTimeout,
    UpstreamError,
)
from interlock.runtime.upstream import http1

# Most specific first is not needed: lookup walks the exception's MRO and takes the first class listed.
EXCEPTION_MAP: Mapping[type[BaseException], tuple[type[UpstreamError], str]] = {
    # sending
    http1.InvalidURL: (ConnectFailed, "invalid upstream URL"),
    http1.InvalidHeader: (ProtocolFailure, "invalid request header"),
    http1.ClientClosed: (ConnectFailed, "gateway shutting down"),
    # connecting
    http1.DNSError: (ConnectFailed, "DNS lookup failed"),
    http1.CertificateError: (ConnectFailed, "TLS certificate rejected"),
    http1.TLSError: (ConnectFailed, "TLS handshake failed"),
    http1.ConnectError: (ConnectFailed, "connection refused or unreachable"),
    http1.ConnectTimeout: (ConnectTimeout, "connect timed out"),
    ConnectionRefusedError: (ConnectFailed, "connection refused or unreachable"),
    ssl.SSLError: (ConnectFailed, "TLS handshake failed"),
    # reading (exchange.py names a Timeout's own deadline; these are the fallbacks)
    http1.Timeout: (TotalTimeout, "timed out"),
    asyncio.TimeoutError: (TotalTimeout, "timed out"),
    http1.Disconnected: (ProtocolFailure, "server disconnected"),
    http1.NotSent: (ProtocolFailure, "connection reset"),  # the resend failed the same way too
    http1.Reset: (ProtocolFailure, "connection reset"),
    http1.Stale: (ProtocolFailure, "server disconnected"),
    http1.Lost: (ProtocolFailure, "connection failed mid-exchange"),
    http1.CutShort: (ProtocolFailure, "response body cut short"),
    http1.HeadTooLarge: (ProtocolFailure, "response head too large"),
    http1.BodyTooLarge: (ProtocolFailure, "answer over the size limit"),
    http1.UnsupportedEncoding: (ProtocolFailure, "response body could not be decoded"),
    http1.BadResponse: (ProtocolFailure, "broken HTTP response"),
    http1.HTTPError: (ProtocolFailure, "HTTP client error"),
    httptools.HttpParserUpgrade: (ProtocolFailure, "broken HTTP response"),
    httptools.HttpParserCallbackError: (ProtocolFailure, "broken HTTP response"),
    httptools.HttpParserInvalidStatusError: (ProtocolFailure, "broken HTTP response"),
    httptools.HttpParserInvalidMethodError: (ProtocolFailure, "broken HTTP response"),
    httptools.HttpParserInvalidURLError: (ProtocolFailure, "broken HTTP response"),
    httptools.HttpParserError: (ProtocolFailure, "broken HTTP response"),
    ConnectionError: (ProtocolFailure, "connection reset"),
    OSError: (ProtocolFailure, "connection failed mid-exchange"),
}

# What adapters catch and hand to ``map_exception``; never CancelledError.
CLIENT_EXCEPTIONS: tuple[type[BaseException], ...] = (
    http1.HTTPError,
    httptools.HttpParserError,
    httptools.HttpParserUpgrade,
    OSError,
    asyncio.TimeoutError,
)


def map_exception(exc: BaseException) -> UpstreamError:
    """The most specific error for a client exception; ``raise map_exception(exc) from exc``."""
    for cls in type(exc).__mro__:
        entry = EXCEPTION_MAP.get(cls)
        if entry is not None:
            error_class, message = entry
            return error_class(message)
    return ProtocolFailure("unexpected client failure")
