"""CORS for browser apps, opt-in by the plan: every header built when the plan loads, one lookup per request.

The compiler has already normalized ``server.cors`` (origins as browsers send them, lowercase header
names, ``*`` never with credentials). Here ``CorsPolicy`` turns it into ready header tuples per allowed
origin. Per request the gateway finds the ``Origin`` header (requests without one, such as every SDK
call from a server, cost one scan of the header list and nothing more) and then:

- a preflight (``OPTIONS`` + ``Origin`` + ``Access-Control-Request-Method``) is answered here: 204 with
  the origin's preflight headers, or 403 ``cors_origin_denied`` for an origin the plan does not list;
- any other request from an allowed origin goes on as usual, its response start gaining the origin's
  headers; from any other origin it goes on without CORS headers (the browser withholds the answer).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from interlock.runtime.wire.openai_chat import error_body
from interlock.schema.plan import PlanCors

Header = tuple[bytes, bytes]
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]

ANY = "*"
METHODS = b"GET, POST, OPTIONS"
GATEWAY_HEADERS = (
    "x-interlock-alias",
    "x-interlock-plan",
    "x-interlock-worker",
    "x-request-id",
    "retry-after",
    "retry-after-ms",
)
"""Response headers a page may read, besides the plan's resolved-model header."""
MAX_SHOWN = 100  # longest origin echoed in a refusal


@dataclass(frozen=True, slots=True)
class CorsAnswer:
    """The headers for one allowed origin (or for every origin, under ``*``)."""

    preflight: tuple[Header, ...]
    response: tuple[Header, ...]
    echo_headers: bool  # the preflight allows the headers it asks for (`allow_headers: ["*"]`)


class CorsPolicy:
    """The frozen CORS tables of one plan."""

    def __init__(self, cors: PlanCors, resolved_header: str) -> None:
        self.any_origin: CorsAnswer | None = None
        self.by_origin: Mapping[bytes, CorsAnswer] = {}
        if cors.allow_origins == [ANY]:
            self.any_origin = _answer(cors, b"*", resolved_header)
        else:
            self.by_origin = {
                o.encode(): _answer(cors, o.encode(), resolved_header) for o in cors.allow_origins
            }

    def answer_for(self, origin: bytes) -> CorsAnswer | None:
        """The headers for ``origin``; None when the plan does not allow it."""
        return self.by_origin.get(origin) or self.any_origin

    async def admit(self, scope: Scope, send: Send, plan_header: Header) -> Send | None:
        """The ``send`` to answer ``scope`` with (gaining the CORS headers of an allowed origin), or
        None when this was a preflight and has been answered here."""
        headers = scope["headers"]
        origin = _origin(headers)
        if origin is None:
            return send  # not from a browser page: nothing to add
        answer = self.answer_for(origin)
        if scope["method"] == "OPTIONS":
            asked = {name: value for name, value in headers if name.startswith(b"access-control-request-")}
            if b"access-control-request-method" in asked:
                await answer_preflight(send, origin, answer, asked, plan_header)
                return None
        return send if answer is None else with_headers(send, answer.response)


def _answer(cors: PlanCors, origin: bytes, resolved_header: str) -> CorsAnswer:
    echo = cors.allow_headers == [ANY]
    allow: tuple[Header, ...] = ((b"access-control-allow-origin", origin),)
    if cors.allow_credentials:
        allow += ((b"access-control-allow-credentials", b"true"),)
    varies = [] if origin == b"*" else ["Origin"]  # an answer that names the origin differs by origin
    preflight = (
        *allow,
        (b"access-control-allow-methods", METHODS),
        (b"access-control-max-age", b"%d" % (cors.max_age_ms // 1000)),
    )
    if not echo:
        preflight += ((b"access-control-allow-headers", ", ".join(cors.allow_headers).encode()),)
    preflight_varies = [*varies, "Access-Control-Request-Headers"] if echo else varies
    if preflight_varies:
        preflight += ((b"vary", ", ".join(preflight_varies).encode()),)
    exposed = ", ".join((resolved_header.lower(), *GATEWAY_HEADERS)).encode()
    response = (*allow, (b"access-control-expose-headers", exposed))
    if varies:
        response += ((b"vary", b"Origin"),)
    return CorsAnswer(preflight, response, echo)


def _origin(headers: list[Header]) -> bytes | None:
    for name, value in headers:
        if name == b"origin":
            return value
    return None


async def answer_preflight(
    send: Send, origin: bytes, answer: CorsAnswer | None, asked: Mapping[bytes, bytes], plan_header: Header
) -> None:
    """204 with the origin's preflight headers, or 403 in OpenAI's error shape for an unlisted origin."""
    if answer is None:
        shown = origin.decode("latin-1")
        shown = shown if len(shown) <= MAX_SHOWN else shown[: MAX_SHOWN - 1] + "…"
        payload = error_body(
            f"origin `{shown}` is not allowed by this gateway's CORS policy (server.cors.allow_origins)",
            "permission_error",
            code="cors_origin_denied",
        )
        headers = [
            plan_header,
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(payload)),
        ]
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": payload})
        return
    headers = [plan_header, *answer.preflight, (b"content-length", b"0")]
    requested = asked.get(b"access-control-request-headers")
    if answer.echo_headers and requested is not None:
        headers.append((b"access-control-allow-headers", requested))
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def with_headers(send: Send, extra: tuple[Header, ...]) -> Send:
    """``send`` whose response start also carries ``extra``."""

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), *extra]
        await send(message)

    return send_with_headers
