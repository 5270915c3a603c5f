"""The transport's failures: one tree, raised by every transport behind the border (net/transport.py).

    HTTPError                     a failure of one upstream HTTP exchange (each with a fixed message)
    +-- InvalidURL, InvalidHeader the request cannot be sent as asked
    +-- ConnectError              no connection: DNSError, TLSError (CertificateError)
    +-- ConnectTimeout            connecting took longer than the connect deadline
    +-- Timeout                   a deadline of the exchange passed (``phase``: FIRST_BYTE, IDLE, TOTAL)
    +-- Stale                     closed or reset before any byte of the answer: Disconnected, Reset
    |                             (NotSent: not a byte of the request went out, the one resendable)
    +-- Lost, CutShort            the connection failed mid-exchange; the answer ended inside itself
    +-- BadResponse               not valid HTTP/1.1, or over a size: HeadTooLarge, BodyTooLarge,
    |                             UnsupportedEncoding
    +-- ClientClosed              the transport was closed while the request waited

The own client (net/http1.py, net/client.py) raises these where it knows them for certain; another
transport (net/httpx_transport.py) translates its library's exceptions into them at its border, so
``upstream/failures.py`` maps one tree to the runtime's errors whatever transport runs.
"""

from __future__ import annotations

FIRST_BYTE = "first_byte"
IDLE = "idle"
TOTAL = "total"


class HTTPError(Exception):
    """A failure of the upstream HTTP exchange; every one is a subclass with a fixed message."""


class InvalidURL(HTTPError):
    """The upstream URL is not an http(s) URL with a host."""


class InvalidHeader(HTTPError):
    """A request header holds a line break or a character HTTP/1.1 cannot carry."""


class ConnectError(HTTPError):
    """The TCP connection could not be made (refused, unreachable)."""


class DNSError(ConnectError):
    """The upstream's host name did not resolve."""


class TLSError(ConnectError):
    """The TLS handshake failed."""


class CertificateError(TLSError):
    """The upstream's TLS certificate was not trusted (or not for its host)."""


class ConnectTimeout(HTTPError):
    """Connecting (TCP and TLS) took longer than the endpoint's connect deadline."""


class Timeout(HTTPError):
    """A deadline of the exchange passed; ``phase`` is FIRST_BYTE, IDLE or TOTAL."""

    def __init__(self, phase: str) -> None:
        super().__init__(phase)
        self.phase = phase


class Stale(HTTPError):
    """The connection was closed or reset before any byte of the answer arrived. On a pooled connection
    that may be an upstream's idle close, or an upstream that read the request and dropped it: the
    client cannot tell, so it reports it (only ``NotSent`` is sent again)."""


class Disconnected(Stale):
    """The upstream closed the connection before any byte of the answer."""


class Reset(Stale):
    """The connection was reset (or the pipe broke) before any byte of the answer."""


class NotSent(Reset):
    """Not a byte of the request went out: the connection was found closed before the write, or the
    write itself failed at once. The one failure after which a request may be sent again."""


class Lost(HTTPError):
    """The connection failed with a socket error other than a reset (no route to host)."""


class CutShort(HTTPError):
    """The connection ended inside the answer (its head or its body)."""


class BadResponse(HTTPError):
    """The answer is not valid HTTP/1.1 (httptools refused it) or is over a size limit."""


class HeadTooLarge(BadResponse):
    """The answer's status line and headers are over MAX_HEAD_BYTES."""


class BodyTooLarge(BadResponse):
    """A non-streamed answer longer than the endpoint's body limit."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"answer is over the {cap}-byte limit")
        self.cap = cap


class UnsupportedEncoding(BadResponse):
    """The answer is compressed (Content-Encoding) although the request asked for identity."""


class ClientClosed(HTTPError):
    """The client was closed while the request waited for a connection."""
