"""The provider border's error mapping: every HTTP-client exception to our classes.

Like httpx's ``_exceptions.py``: one table maps each exception class of the transport (its one tree,
net/http_errors.py, whatever transport runs; httptools' parser; asyncio/OS/ssl) to the most specific
``interlock.runtime.base.errors`` class, and adapters ``raise map_exception(exc) from exc``.
``tests/runtime/upstream/test_failures.py`` walks the transport's and httptools' exception classes and
fails when one is missing. What an upstream's answer says went wrong (a status, an error object) is
read by ``wire.error_bodies``.
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
from interlock.runtime.net import http_errors as net

# Most specific first is not needed: lookup walks the exception's MRO and takes the first class listed.
EXCEPTION_MAP: Mapping[type[BaseException], tuple[type[UpstreamError], str]] = {
    # sending
    net.InvalidURL: (ConnectFailed, "invalid upstream URL"),
    net.InvalidHeader: (ProtocolFailure, "invalid request header"),
    net.ClientClosed: (ConnectFailed, "gateway shutting down"),
    # connecting
    net.DNSError: (ConnectFailed, "DNS lookup failed"),
    net.CertificateError: (ConnectFailed, "TLS certificate rejected"),
    net.TLSError: (ConnectFailed, "TLS handshake failed"),
    net.ConnectError: (ConnectFailed, "connection refused or unreachable"),
    net.ConnectTimeout: (ConnectTimeout, "connect timed out"),
    ConnectionRefusedError: (ConnectFailed, "connection refused or unreachable"),
    ssl.SSLError: (ConnectFailed, "TLS handshake failed"),
    # reading (exchange.py names a Timeout's own deadline; these are the fallbacks)
    net.Timeout: (TotalTimeout, "timed out"),
    asyncio.TimeoutError: (TotalTimeout, "timed out"),
    net.Disconnected: (ProtocolFailure, "server disconnected"),
    net.NotSent: (ProtocolFailure, "connection reset"),  # the resend failed the same way too
    net.Reset: (ProtocolFailure, "connection reset"),
    net.Stale: (ProtocolFailure, "server disconnected"),
    net.Lost: (ProtocolFailure, "connection failed mid-exchange"),
    net.CutShort: (ProtocolFailure, "response body cut short"),
    net.HeadTooLarge: (ProtocolFailure, "response head too large"),
    net.BodyTooLarge: (ProtocolFailure, "answer over the size limit"),
    net.UnsupportedEncoding: (ProtocolFailure, "response body could not be decoded"),
    net.BadResponse: (ProtocolFailure, "broken HTTP response"),
    net.HTTPError: (ProtocolFailure, "HTTP client error"),
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
    net.HTTPError,
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
