"""One request lifecycle for every wire format: read, resolve, guard, walk, lease, stream, count.

Why this boundary: aliases, fallback, health, slots, guards, resolved-model headers, disconnects,
metrics and error mapping must be the same whatever API a caller speaks. A ``Surface`` (one module per
wire format under ``surfaces/``) only turns its request into the internal form, which is the
OpenAI-shaped dict the upstream adapters already translate (so adapters stay unchanged), and renders
answers, stream events and errors in its own shape. This module never looks at a surface's format.

Errors are mapped once (``failure_of``) to a ``Failure``: a status, an OpenAI-vocabulary type
(``invalid_request_error``, ``server_error``, ...), a bounded message, and headers (``Retry-After``);
each surface words it in its own shape. A stream is answered only once its first upstream chunk has
arrived (until then the router may fall back); after that a failure ends the stream with the
surface's error event and no success terminator.

A stream is relayed one upstream read at a time: the chunks decoded from one read are rendered and
written as one piece, straight to the transport when the server offers it (``StreamBody``, the
``interlock.stream_body`` scope extension of ``interlock serve``), else through ASGI ``send``.
"""

from __future__ import annotations

import abc
import asyncio
import functools
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from interlock.runtime.access import caller_of, refusal_message
from interlock.runtime.connections import STREAM_BODY, StreamBody
from interlock.runtime.errors import (
    BodyTooLarge,
    CallerLimited,
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
from interlock.runtime.usage.credits import account_of, check_credits, has_budget
from interlock.runtime.usage.metering import delta_chars, metered

if TYPE_CHECKING:
    from interlock.runtime.app import Gateway

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Header = tuple[bytes, bytes]
Handler = Callable[["Gateway", Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("interlock.requests")

JSON_TYPE: Header = (b"content-type", b"application/json")
MAX_ECHO = 200  # longest upstream error text passed on to the caller
MAX_DROPPED_NAMES = 16  # field names listed in X-Interlock-Dropped
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")

_UPSTREAM_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}


class ClientGone(Exception):
    """The client disconnected before the request body was read."""


# -- what a surface provides -----------------------------------------------------------------------


@dataclass(slots=True)
class Parsed:
    """A request in the internal form: ``operation`` is the router's (``chat`` | ``embeddings``) and the
    metrics' endpoint label; ``body`` is OpenAI-shaped; ``echo`` is the model name answers give back
    (the caller's; the lifecycle sets the default alias's name when the caller named none)."""

    operation: str
    model: str | None
    stream: bool
    body: dict[str, Any]
    echo: Any = None
    # what the caller sent that the internal form cannot carry (named in X-Interlock-Dropped)
    dropped: tuple[str, ...] = ()
    # what the surface keeps from the request to render its answers (Responses: flattened tools' namespaces)
    extras: Any = None


def chat_request(model: str | None, stream: bool, internal: dict[str, Any]) -> Parsed:
    """A chat request in the internal form, echoing the caller's model name; a stream asks the upstream
    for its usage too (the metrics count it)."""
    if stream:
        internal["stream"] = True
        internal["stream_options"] = {"include_usage": True}
    return Parsed("chat", model, stream, internal, model)


def first_choice(result: Mapping[str, Any]) -> dict[str, Any]:
    """The first choice of an OpenAI-shaped answer (empty when there is none)."""
    choice: dict[str, Any] = (result.get("choices") or [{}])[0]
    return choice


def reasoning(part: Mapping[str, Any]) -> Any:
    """The reasoning text of an answer's message or a stream's delta: providers name it either way."""
    return part.get("reasoning") or part.get("reasoning_content")


@dataclass(slots=True)
class Failure:
    """Anything a request can end with, before a surface words it."""

    status: int
    message: str
    type: str
    param: str | None = None
    code: str | None = None
    headers: list[Header] = field(default_factory=list)


class StreamRender(abc.ABC):
    """One stream's events in a surface's wire format; built per stream (it may keep state)."""

    headers: tuple[Header, ...]

    @abc.abstractmethod
    def chunk(self, chunk: dict[str, Any]) -> bytes:
        """The bytes for one OpenAI ``chat.completion.chunk`` (may be empty)."""

    @abc.abstractmethod
    def end(self) -> bytes:
        """The terminal success event(s)."""

    @abc.abstractmethod
    def error(self, message: str) -> bytes:
        """The event that ends a stream broken after it started: no success terminator follows."""


class Surface(abc.ABC):
    """One wire format's edge: parse into the internal form; render answers, streams and errors."""

    operation = "chat"  # the metrics' endpoint label for a request that ends before it is parsed

    @abc.abstractmethod
    def parse(self, body: dict[str, Any]) -> Parsed:
        """The internal form; raises ``InvalidRequest`` (or another ``GatewayError``)."""

    @abc.abstractmethod
    def answer(self, parsed: Parsed, result: dict[str, Any], candidate: str) -> bytes:
        """The answer body (JSON) for an OpenAI-shaped ``result`` answered by ``candidate``."""

    @abc.abstractmethod
    def stream(self, parsed: Parsed, candidate: str) -> StreamRender: ...

    @abc.abstractmethod
    def error(self, failure: Failure) -> bytes:
        """The JSON error body."""


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
        raise InvalidRequest(f"the request body must be a JSON object, not {json_type(body)}")
    return body


def json_type(value: object) -> str:
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


# -- errors ----------------------------------------------------------------------------------------


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """Upstream text is passed on only without any credential value, and cut short."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "[redacted]")
    return text if len(text) <= MAX_ECHO else text[: MAX_ECHO - 1] + "…"


def failure_of(exc: BaseException, plan: RuntimePlan) -> Failure:
    """Status, wording and extra headers for anything a request can end with, on any surface."""
    if isinstance(exc, GatewayError):
        extra: list[Header] = []
        if exc.retry_after is not None:
            extra.extend(retry_after_headers(exc.retry_after))
        if isinstance(exc, BodyTooLarge):
            extra.append((b"connection", b"close"))
        return Failure(exc.status, exc.message, exc.type, exc.param, exc.code, extra)
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
            return Failure(status, message, type_, None, "upstream_error", headers)
        return Failure(
            502,
            f"upstream {cid} sent an answer that could not be read ({error.error_class})",
            "server_error",
            None,
            "upstream_malformed",
            headers,
        )
    log.error("unexpected error while answering a request", exc_info=exc)
    return Failure(500, "internal error in the gateway", "server_error", None, "internal_error")


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


async def send_error(
    send: Send, exc: BaseException, plan: RuntimePlan, headers: list[Header], surface: Surface
) -> int:
    """Answer ``exc`` in the surface's shape; returns the status sent."""
    failure = failure_of(exc, plan)
    headers.extend(failure.headers)
    await send_json(send, failure.status, surface.error(failure), headers)
    return failure.status


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


# -- the lifecycle ---------------------------------------------------------------------------------


def handler(surface: Surface) -> Handler:
    """The ASGI handler that runs the lifecycle for ``surface``: one per route row, built once (a
    partial, so a request costs no extra coroutine frame)."""
    return functools.partial(_handle, surface)


async def _handle(surface: Surface, gateway: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    endpoint = surface.operation
    record = RequestRecord(endpoint, gateway.journal.request_id(scope["headers"]))
    if gateway.tracing is not None:
        record.trace = gateway.tracing.begin(scope, record)
    started = record.started
    plan = gateway.plan  # in-flight requests finish on the plan they started with
    metrics = gateway.metrics
    headers: list[Header] = [plan.plan_header, (b"x-request-id", record.id)]
    counted = False  # admitted against the caller's rates: `counters.done` must follow
    try:
        raw = await read_body(scope, receive, plan.server.max_body_bytes)
        parsed = surface.parse(parse_object(raw))
        endpoint = record.endpoint = parsed.operation
        target = resolve(plan, parsed.model)
        if parsed.echo is None:  # no model named: answers name the default alias
            parsed.echo = target.label
        preflight = Preflight(needs_of(parsed.body, endpoint, plan.preflight), plan.preflight.mode)
        if plan.routing.sticky is not None:
            preflight.session = session_header(scope, plan.routing.sticky.header)
        if plan.keys is not None:  # `auth: off` costs nothing more than this test
            caller = record.caller = caller_of(scope)  # authenticated by `Gateway` (app.py)
            record.target = target  # a refusal below is logged and audited with what was asked for
            caller.check(target.label)
            target = caller.targets.get(target.label, target)  # its chain without what it may not use
            if has_budget(caller):  # before the rates: a refused request takes none of them
                check_credits(gateway.ledger, caller, preflight.needs, plan, target)
            if caller.budgets:
                refusal = await gateway.counters.take(caller.budgets)
                if refusal is not None:
                    raise CallerLimited(refusal_message(caller, refusal), retry_after=refusal.retry_after_s)
                counted = True
    except ClientGone:
        metrics.client_disconnects.labels(endpoint).inc()
        record.status = 499
        _finish(gateway, record)
        return
    except Exception as exc:  # a refusal; anything else is a bug, logged, answered 500 in the shape
        status = record.status = await send_error(send, exc, plan, headers, surface)
        record.error = exc
        metrics.requests.labels(endpoint, str(status)).inc()
        _finish(gateway, record)
        return
    headers.append(target.header)
    record.target, record.stream = target, parsed.stream
    watch = DisconnectWatch(receive)
    exchange = Exchange(gateway, plan, surface, parsed, target, preflight, headers, send, watch, record)
    try:
        if parsed.stream:
            extensions = scope.get("extensions")
            exchange.body = extensions.get(STREAM_BODY) if extensions else None
            status = await exchange.stream()
        else:
            status = await exchange.answer()
    except asyncio.CancelledError:
        if not watch.swallow():
            if record.trace is not None:  # the server is stopping: the span still ends
                record.status = 499
                record.trace.end(record)
            raise
        metrics.client_disconnects.labels(endpoint).inc()
        status = 499
    finally:
        watch.stop()
        tally = metered(record, preflight.needs, plan)  # None: no upstream answered
        if counted:
            await gateway.counters.done(record.caller.budgets, tally.tokens if tally is not None else 0)
    metrics.requests.labels(endpoint, str(status)).inc()
    metrics.request_seconds.labels(endpoint).observe(time.perf_counter() - started)
    record.status = status
    if tally is not None and record.answered is not None:  # a stream cut short or left too: debit it
        gateway.ledger.debit(account_of(record.caller), record.answered.candidate.id, tally)
    _finish(gateway, record)


def _finish(gateway: Gateway, record: RequestRecord) -> None:
    """The one end of every request: the journal (access log, events, audit), then the span."""
    gateway.journal.finish(record)
    if record.trace is not None:
        record.trace.end(record)


class Exchange:
    """One admitted request on its way through the router: everything that travels together."""

    __slots__ = (
        "body",
        "gateway",
        "headers",
        "parsed",
        "plan",
        "preflight",
        "record",
        "send",
        "surface",
        "target",
        "watch",
    )

    def __init__(
        self,
        gateway: Gateway,
        plan: RuntimePlan,
        surface: Surface,
        parsed: Parsed,
        target: Target,
        preflight: Preflight,
        headers: list[Header],
        send: Send,
        watch: DisconnectWatch,
        record: RequestRecord,
    ) -> None:
        self.gateway = gateway
        self.plan = plan
        self.surface = surface
        self.parsed = parsed
        self.target = target
        self.preflight = preflight
        self.headers = headers
        self.send = send
        self.watch = watch
        self.record = record  # the journal's: what answered, what it ended with
        self.body: StreamBody | None = None  # the server's direct writer for a stream's body, if any

    async def _refused(self, exc: Exception) -> int:
        self.record.error = exc
        self.watch.stop()
        self.headers.extend(self.preflight.headers())
        return await send_error(self.send, exc, self.plan, self.headers, self.surface)

    async def answer(self) -> int:
        router, parsed = self.gateway.router, self.parsed
        try:
            answered = await (
                router.chat(self.target, parsed.body, self.preflight)
                if parsed.operation == "chat"
                else router.embed(self.target, parsed.body, self.preflight)
            )
        except Exception as exc:  # gateway answers, refusals, and (logged) bugs: in the surface's shape
            return await self._refused(exc)
        self.record.answered = answered
        headers = self.headers
        headers.extend(self.preflight.headers())
        payload = self.surface.answer(parsed, answered.result, answered.candidate.id)
        headers.append(answered.candidate.resolved_header)
        if answered.route.worker_header is not None:
            headers.append(answered.route.worker_header)
        say_dropped(headers, answered, parsed.operation, parsed.body, parsed.dropped)
        self.watch.stop()
        await send_json(self.send, 200, payload, headers)
        self._observe_overhead(answered)
        return 200

    async def stream(self) -> int:
        router = self.gateway.router
        began = False  # once the 200 is on its way, nothing may answer again

        async def deliver(answered: Answered[ChatStream]) -> int:
            """Write the stream out; runs inside the router's hold on the slot."""
            nonlocal began
            began = True
            self.record.answered = answered
            try:
                return await self._deliver(answered)
            finally:
                await answered.result.aclose()

        try:
            return await router.chat_stream(self.target, self.parsed.body, deliver, self.preflight)
        except Exception as exc:  # gateway answers, refusals, and (logged) bugs: in the surface's shape
            if began:
                raise
            return await self._refused(exc)

    async def _deliver(self, answered: Answered[ChatStream]) -> int:
        router, send, parsed, headers = self.gateway.router, self.send, self.parsed, self.headers
        cid = answered.candidate.id
        render = self.surface.stream(parsed, cid)
        headers.extend(self.preflight.headers())
        headers.append(answered.candidate.resolved_header)
        if answered.route.worker_header is not None:
            headers.append(answered.route.worker_header)
        say_dropped(headers, answered, "chat", parsed.body, parsed.dropped)
        headers.extend(render.headers)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        body = self.body if self.body is not None and self.body.ready() else None
        read, render_chunk = answered.result.read, render.chunk
        first = True
        record = self.record
        try:
            while chunks := await read():  # the chunks of one upstream read: one write
                for chunk in chunks:
                    usage = chunk.get("usage")
                    if usage:  # the last chunk, asked for with `include_usage`
                        record.usage = usage
                    else:
                        record.output_chars += delta_chars(chunk)
                data = render_chunk(chunks[0]) if len(chunks) == 1 else b"".join(map(render_chunk, chunks))
                if data:
                    if body is None:
                        await send({"type": "http.response.body", "body": data, "more_body": True})
                    elif body.write(data):
                        await body.drain()  # the client reads slower than the upstream writes
                if first:
                    first = False
                    self._observe_overhead(answered)
        except Exception as exc:
            reason = router.stream_failed(answered, exc)
            self.record.error = exc
            log.warning("stream from %s broke after the first byte (%s)", cid, reason)
            event = render.error(
                f"the stream from {cid} broke after it had started ({reason}); the answer is incomplete"
            )
            self.watch.stop()
            await send({"type": "http.response.body", "body": event})
            return 200
        self.watch.stop()
        await send({"type": "http.response.body", "body": render.end()})
        return 200

    def _observe_overhead(self, answered: Answered[Any]) -> None:
        """The gateway's own time so far: since ``started``, less the upstream waits and slot queueing."""
        self.gateway.metrics.overhead_seconds.labels(self.parsed.operation).observe(
            time.perf_counter() - self.record.started - answered.upstream_s - answered.queued_s
        )


def say_dropped(
    headers: list[Header],
    answered: Answered[Any] | Answered[ChatStream],
    endpoint: str,
    body: dict[str, Any],
    parsed: tuple[str, ...] = (),
) -> None:
    """``X-Interlock-Dropped``: the request's fields the answering candidate's upstream never got (those
    the surface could not put in the internal form, ``parsed``, first)."""
    dropped = DROPS[answered.candidate.kind, endpoint].of(body)
    if parsed:
        dropped = [*parsed, *dropped]
    if dropped:
        # the names come from the caller: only plain ones go into a header, at most MAX_DROPPED_NAMES
        shown = [name for name in dropped if _PLAIN_NAME.fullmatch(name)][:MAX_DROPPED_NAMES]
        if len(shown) < len(dropped):
            shown.append(f"+{len(dropped) - len(shown)} more")
        headers.append((b"x-interlock-dropped", ", ".join(shown).encode()))
