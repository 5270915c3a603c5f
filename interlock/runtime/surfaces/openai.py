"""The OpenAI-compatible HTTP surface: request parsing and validation, response shaping, SSE writing.

The hot endpoints (``POST /v1/chat/completions``, ``POST /v1/embeddings``) are raw ASGI: the body is
parsed once with orjson, only what routing needs is checked (model, stream, messages/input and their
types), and the dict is passed on unchanged. Answers are orjson bytes with pre-encoded headers. Every
error uses OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``.

A stream is answered only once its first upstream chunk has arrived (until then the router may fall
back); after that a failure ends the stream with one SSE error event and no ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

import orjson

from interlock.runtime.errors import (
    BodyTooLarge,
    ClientError,
    GatewayError,
    InvalidRequest,
    whole_seconds,
)
from interlock.runtime.journal import RequestRecord
from interlock.runtime.needs import needs_of
from interlock.runtime.plan import RuntimePlan, Target
from interlock.runtime.preflight import Preflight
from interlock.runtime.resolve import resolve
from interlock.runtime.router import Answered, CandidateRefused
from interlock.runtime.sticky import session_header
from interlock.runtime.upstream.base import ChatStream
from interlock.runtime.upstream.fields import DROPS

if TYPE_CHECKING:
    from interlock.runtime.app import Gateway

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Header = tuple[bytes, bytes]

log = logging.getLogger("interlock.requests")

JSON_TYPE: Header = (b"content-type", b"application/json")
SSE_HEADERS: tuple[Header, ...] = (
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)
DONE = b"data: [DONE]\n\n"
MAX_ECHO = 200  # longest upstream error text passed on to the caller
MAX_DROPPED_NAMES = 16  # field names listed in X-Interlock-Dropped
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")

_UPSTREAM_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}


class ClientGone(Exception):
    """The client disconnected before the request body was read."""


# -- request ---------------------------------------------------------------------------------------


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole body, refusing more than ``limit`` bytes (by Content-Length, else while reading)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                raise InvalidRequest("the Content-Length header is not a number") from None
            if declared > limit:
                raise BodyTooLarge(
                    f"the request body is {declared} bytes; this gateway accepts at most {limit}"
                )
            break
    message = await receive()
    if message["type"] != "http.request":
        raise ClientGone
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        if len(body) > limit:
            raise BodyTooLarge(f"the request body is over {limit} bytes, the most this gateway accepts")
        return body
    parts = [body]
    size = len(body)
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"the request body is over {limit} bytes, the most this gateway accepts")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def parse_object(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"the request body is not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise InvalidRequest(f"the request body must be a JSON object, not {_json_type(body)}")
    return body


def check_model(body: Mapping[str, Any]) -> str | None:
    model = body.get("model")
    if model is None or (isinstance(model, str) and model):
        return model
    if isinstance(model, str):
        raise InvalidRequest("`model` must not be empty", param="model")
    raise InvalidRequest(f"`model` must be a string, not {_json_type(model)}", param="model")


def check_chat(body: Mapping[str, Any]) -> tuple[str | None, bool]:
    """``(model, stream)`` of a chat request whose routing-relevant fields have the right types."""
    model = check_model(body)
    messages = body.get("messages")
    if messages is None:
        raise InvalidRequest("`messages` is required", param="messages")
    if not isinstance(messages, list):
        raise InvalidRequest(f"`messages` must be an array, not {_json_type(messages)}", param="messages")
    if not messages:
        raise InvalidRequest("`messages` must hold at least one message", param="messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidRequest(
                f"`messages[{index}]` must be an object, not {_json_type(message)}",
                param=f"messages[{index}]",
            )
        if not isinstance(message.get("role"), str):
            raise InvalidRequest(
                f"`messages[{index}].role` must be a string", param=f"messages[{index}].role"
            )
    stream = body.get("stream")
    if stream is None:
        return model, False
    if not isinstance(stream, bool):
        raise InvalidRequest(f"`stream` must be a boolean, not {_json_type(stream)}", param="stream")
    return model, stream


def check_embeddings(body: Mapping[str, Any]) -> str | None:
    model = check_model(body)
    data = body.get("input")
    if data is None:
        raise InvalidRequest("`input` is required", param="input")
    if isinstance(data, str):
        return model
    if not isinstance(data, list) or not data:
        raise InvalidRequest("`input` must be a string or a non-empty array", param="input")
    return model


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


# -- responses -------------------------------------------------------------------------------------


def error_body(message: str, type_: str, *, param: str | None = None, code: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "param": param, "code": code}})


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """Upstream text is passed on only without any credential value, and cut short."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "[redacted]")
    return text if len(text) <= MAX_ECHO else text[: MAX_ECHO - 1] + "…"


def describe_error(exc: BaseException, plan: RuntimePlan) -> tuple[int, bytes, list[Header]]:
    """Status, OpenAI-shaped body and extra headers for anything a request can end with."""
    if isinstance(exc, GatewayError):
        extra: list[Header] = []
        if exc.retry_after is not None:
            extra.extend(retry_after_headers(exc.retry_after))
        if isinstance(exc, BodyTooLarge):
            extra.append((b"connection", b"close"))
        return exc.status, error_body(exc.message, exc.type, param=exc.param, code=exc.code), extra
    if isinstance(exc, CandidateRefused):
        cid, error = exc.candidate.id, exc.error
        headers = [exc.candidate.resolved_header]
        if isinstance(error, ClientError):
            status = error.status or 400
            if status in (401, 403):
                provider = exc.candidate.provider
                message = f"upstream {cid} refused the gateway's credentials for {provider} ({status})"
            else:
                message = f"upstream {cid} answered {status}: {scrub(error.message, plan.secrets)}"
            type_ = _UPSTREAM_TYPES.get(status, "invalid_request_error")
            return status, error_body(message, type_, code="upstream_error"), headers
        return (
            502,
            error_body(
                f"upstream {cid} sent an answer that could not be read ({error.error_class})",
                "server_error",
                code="upstream_malformed",
            ),
            headers,
        )
    log.error("unexpected error while answering a request", exc_info=exc)
    return 500, error_body("internal error in the gateway", "server_error", code="internal_error"), []


def retry_after_headers(seconds: float) -> tuple[Header, Header]:
    """``Retry-After`` in whole seconds, rounded up, and ``Retry-After-Ms`` (the OpenAI SDKs read it)."""
    return (
        (b"retry-after", b"%d" % whole_seconds(seconds)),
        (b"retry-after-ms", b"%d" % max(1, math.ceil(seconds * 1000))),
    )


async def send_json(send: Send, status: int, payload: bytes, headers: list[Header]) -> None:
    headers.append(JSON_TYPE)
    headers.append((b"content-length", b"%d" % len(payload)))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def send_error(send: Send, exc: BaseException, plan: RuntimePlan, headers: list[Header]) -> int:
    """Answer ``exc`` as ``describe_error`` says; returns the status sent."""
    status, payload, extra = describe_error(exc, plan)
    headers.extend(extra)
    await send_json(send, status, payload, headers)
    return status


# -- disconnects -----------------------------------------------------------------------------------


class DisconnectWatch:
    """Cancels the handling task when the client goes away; ``stop`` before the last byte is sent."""

    __slots__ = ("_watcher", "done", "fired", "task")

    def __init__(self, receive: Receive) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.task = task
        self.done = False
        self.fired = False
        self._watcher = asyncio.get_running_loop().create_task(self._watch(receive))

    async def _watch(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                if not self.done:
                    self.fired = True
                    self.task.cancel()
                return

    def stop(self) -> None:
        self.done = True
        self._watcher.cancel()

    def swallow(self) -> bool:
        """After a CancelledError: True when it was this watch's doing (then it is undone)."""
        if self.fired:
            self.task.uncancel()
            return True
        return False


# -- endpoints -------------------------------------------------------------------------------------


async def chat_completions(gateway: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    await _handle(gateway, scope, receive, send, "chat")


async def embeddings(gateway: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    await _handle(gateway, scope, receive, send, "embeddings")


async def method_not_allowed(gateway: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    message = f"{scope['method']} {scope['path']}: Method Not Allowed (use POST)"
    headers = [gateway.plan.plan_header, (b"allow", b"POST")]
    await send_json(send, 405, error_body(message, "invalid_request_error", code="405"), headers)


async def _handle(gateway: Gateway, scope: Scope, receive: Receive, send: Send, endpoint: str) -> None:
    record = RequestRecord(endpoint, gateway.journal.request_id(scope["headers"]))
    started = record.started
    plan = gateway.plan  # in-flight requests finish on the plan they started with
    metrics = gateway.metrics
    headers: list[Header] = [plan.plan_header, (b"x-request-id", record.id)]
    try:
        raw = await read_body(scope, receive, plan.server.max_body_bytes)
        body = parse_object(raw)
        if endpoint == "chat":
            model, stream = check_chat(body)
        else:
            model, stream = check_embeddings(body), False
        target = resolve(plan, model)
        preflight = Preflight(needs_of(body, endpoint, plan.preflight), plan.preflight.mode)
        if plan.routing.sticky is not None:
            preflight.session = session_header(scope, plan.routing.sticky.header)
    except ClientGone:
        metrics.client_disconnects.labels(endpoint).inc()
        record.status = 499
        gateway.journal.finish(record)
        return
    except GatewayError as exc:
        status = record.status = await send_error(send, exc, plan, headers)
        record.error = exc
        metrics.requests.labels(endpoint, str(status)).inc()
        gateway.journal.finish(record)
        return
    headers.append(target.header)
    record.target, record.stream = target, stream
    watch = DisconnectWatch(receive)
    try:
        if stream:
            status = await _stream(gateway, plan, target, body, preflight, headers, send, watch, record)
        else:
            status = await _answer(
                gateway, plan, target, body, preflight, headers, send, watch, endpoint, record
            )
    except asyncio.CancelledError:
        if not watch.swallow():
            raise
        metrics.client_disconnects.labels(endpoint).inc()
        status = 499
    finally:
        watch.stop()
    metrics.requests.labels(endpoint, str(status)).inc()
    metrics.request_seconds.labels(endpoint).observe(time.perf_counter() - started)
    record.status = status
    gateway.journal.finish(record)


async def _answer(
    gateway: Gateway,
    plan: RuntimePlan,
    target: Target,
    body: dict[str, Any],
    preflight: Preflight,
    headers: list[Header],
    send: Send,
    watch: DisconnectWatch,
    endpoint: str,
    record: RequestRecord,
) -> int:
    router = gateway.router
    try:
        answered = await (
            router.chat(target, body, preflight)
            if endpoint == "chat"
            else router.embed(target, body, preflight)
        )
    except Exception as exc:  # gateway answers, refusals, and (logged) bugs: all in OpenAI's shape
        watch.stop()
        record.error = exc
        headers.extend(preflight.headers())
        return await send_error(send, exc, plan, headers)
    record.answered = answered
    headers.extend(preflight.headers())
    result = answered.result
    result["model"] = answered.candidate.id
    payload = orjson.dumps(result)
    headers.append(answered.candidate.resolved_header)
    if answered.route.worker_header is not None:
        headers.append(answered.route.worker_header)
    _say_dropped(headers, answered, endpoint, body)
    watch.stop()
    await send_json(send, 200, payload, headers)
    _observe_overhead(gateway, endpoint, record.started, answered)
    return 200


async def _stream(
    gateway: Gateway,
    plan: RuntimePlan,
    target: Target,
    body: dict[str, Any],
    preflight: Preflight,
    headers: list[Header],
    send: Send,
    watch: DisconnectWatch,
    record: RequestRecord,
) -> int:
    router = gateway.router
    began = False  # once the 200 is on its way, nothing may answer again

    async def deliver(answered: Answered[ChatStream]) -> int:
        """Write the stream out; runs inside the router's hold on the slot."""
        nonlocal began
        cid = answered.candidate.id
        stream = answered.result
        began = True
        record.answered = answered
        try:
            headers.extend(preflight.headers())
            headers.append(answered.candidate.resolved_header)
            if answered.route.worker_header is not None:
                headers.append(answered.route.worker_header)
            _say_dropped(headers, answered, "chat", body)
            headers.extend(SSE_HEADERS)
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            first = True
            try:
                async for chunk in stream:
                    chunk["model"] = cid
                    await send(
                        {
                            "type": "http.response.body",
                            "body": b"data: %b\n\n" % orjson.dumps(chunk),
                            "more_body": True,
                        }
                    )
                    if first:
                        first = False
                        _observe_overhead(gateway, "chat", record.started, answered)
            except Exception as exc:
                reason = router.stream_failed(answered, exc)
                record.error = exc
                log.warning("stream from %s broke after the first byte (%s)", cid, reason)
                event = error_body(
                    f"the stream from {cid} broke after it had started ({reason}); the answer is incomplete",
                    "server_error",
                    code="stream_aborted",
                )
                watch.stop()
                await send({"type": "http.response.body", "body": b"data: %b\n\n" % event})
                return 200
            watch.stop()
            await send({"type": "http.response.body", "body": DONE})
            return 200
        finally:
            await stream.aclose()

    try:
        return await router.chat_stream(target, body, deliver, preflight)
    except Exception as exc:  # gateway answers, refusals, and (logged) bugs: all in OpenAI's shape
        if began:
            raise
        watch.stop()
        record.error = exc
        headers.extend(preflight.headers())
        return await send_error(send, exc, plan, headers)


def _say_dropped(headers: list[Header], answered: Answered[Any], endpoint: str, body: dict[str, Any]) -> None:
    """``X-Interlock-Dropped``: the request's fields the answering candidate's upstream never got."""
    dropped = DROPS[answered.candidate.kind, endpoint].of(body)
    if dropped:
        # the names come from the caller: only plain ones go into a header, at most MAX_DROPPED_NAMES
        shown = [name for name in dropped if _PLAIN_NAME.fullmatch(name)][:MAX_DROPPED_NAMES]
        if len(shown) < len(dropped):
            shown.append(f"+{len(dropped) - len(shown)} more")
        headers.append((b"x-interlock-dropped", ", ".join(shown).encode()))


def _observe_overhead(gateway: Gateway, endpoint: str, started: float, answered: Answered[Any]) -> None:
    """The gateway's own time so far: since ``started``, less the upstream waits and slot queueing."""
    gateway.metrics.overhead_seconds.labels(endpoint).observe(
        time.perf_counter() - started - answered.upstream_s - answered.queued_s
    )
