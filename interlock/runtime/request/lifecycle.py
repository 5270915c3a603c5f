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

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from interlock.runtime.base.asgi import (
    DISCONNECT,
    STREAM_BODY,
    ClientGone,
    DisconnectWatch,
    Header,
    Receive,
    Scope,
    Send,
    StreamBody,
    read_object,
    send_json,
)
from interlock.runtime.base.errors import untangle
from interlock.runtime.books.estimate import chars_tokens, needs_of
from interlock.runtime.books.record import Answered, RequestRecord
from interlock.runtime.guards.preflight import Preflight
from interlock.runtime.request.keepalive import Keepalive
from interlock.runtime.request.resolve import resolve
from interlock.runtime.request.resume import ContinuedStream, Said, continued, gatherer, replicas, resumable
from interlock.runtime.surfaces.base import Parsed, Surface, failure_of, forwarded, say_dropped, with_usage
from interlock.runtime.usage.metering import (
    delta_chars,
    estimated_usage,
    metered,
    price_of,
    request_tally,
)

if TYPE_CHECKING:
    from interlock.runtime.loaded.callers import Caller
    from interlock.runtime.loaded.plan import RuntimePlan
    from interlock.runtime.loaded.tables import Target
    from interlock.runtime.request.services import Hooks, RequestServices, Stake
    from interlock.runtime.usage.base import Tally
    from interlock.runtime.wire.base import ChatStream, StreamRender

Handler = Callable[["RequestServices", Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("interlock.requests")


# -- the lifecycle ---------------------------------------------------------------------------------


def handler(surface: Surface) -> Handler:
    """The ASGI handler that runs the lifecycle for ``surface``: one per route row, built once (a
    partial, so a request costs no extra coroutine frame)."""
    return functools.partial(_handle, surface)


async def _handle(
    surface: Surface, services: RequestServices, scope: Scope, receive: Receive, send: Send
) -> None:
    plan, hooks = services.current.plan, services.current.hooks  # a request ends on the plan it began on
    caller = None
    if hooks.authenticate is not None:  # keys (`features/keys.py`); `auth: off` skips this at once
        caller = await hooks.authenticate(services, scope, send, surface, route=True, metered=True)
        if caller is None:  # refused, and answered
            return
    record = RequestRecord(surface.operation, services.journal.request_id(scope["headers"]))
    record.surface = surface
    if hooks.begin is not None:  # the request's span (`features/tracing`)
        record.trace = hooks.begin(scope, record)
    headers: list[Header] = [plan.plan_header, (b"x-request-id", record.id)]
    exchange = Exchange(services, plan, hooks, surface, headers, send, record, scope, caller or record.caller)
    try:  # read: parsed in its surface's shape, resolved to its target, estimated; then admitted
        _read(exchange, await read_object(scope, receive, plan.server.max_body_bytes))
        for admit, waits in hooks.admit:  # the features that admit: in table order (`features`)
            if waits:
                await admit(exchange)
            else:
                admit(exchange)
    except Exception as exc:  # a refusal (or the client gone); anything else is a bug, logged, a 500
        await exchange.unadmitted(exc)
        return
    headers.append(exchange.target.header)
    record.target, record.stream = exchange.target, exchange.parsed.stream
    extensions = scope.get("extensions")
    watch = exchange.watch = DisconnectWatch(receive, extensions.get(DISCONNECT) if extensions else None)
    try:
        if exchange.parsed.stream:
            exchange.body = extensions.get(STREAM_BODY) if extensions else None
            status = await exchange.stream()
        else:
            status = await exchange.answer()
    except asyncio.CancelledError:
        if not watch.swallow():
            _stopping(record)
            raise
        services.metrics.client_disconnects.labels(record.endpoint).inc()
        status = 499
    finally:
        watch.stop()
        tally = _settle(exchange)
        if exchange.stakes is not None:  # after the debit: in this process the credits never look free
            for stake in exchange.stakes:
                await stake(tally)
    services.metrics.requests.labels(record.endpoint, str(status)).inc()
    services.metrics.request_seconds.labels(record.endpoint).observe(time.perf_counter() - record.started)
    record.status = status
    _finish(services, hooks, record)


def _read(exchange: Exchange, body: Any) -> None:
    """The request read: parsed in its surface's shape, resolved to its target (an alias is one lookup;
    ``resolve`` words every other outcome), estimated (``Preflight``: its needs, its deadline)."""
    plan, surface, scope, record = exchange.plan, exchange.surface, exchange.scope, exchange.record
    parsed = surface.parse(body)
    if parsed.native is not None and surface.forwards:
        parsed = forwarded(parsed, scope, surface.forwards)
    endpoint = record.endpoint = parsed.operation
    model = parsed.model
    alias = plan.aliases.get(model) if model is not None else None
    target = exchange.target = alias if alias is not None else resolve(plan, model, exchange.caller)
    exchange.parsed = parsed if parsed.echo is not None else replace(parsed, echo=target.label)
    needs = needs_of(parsed.body, endpoint, plan.preflight)
    preflight = exchange.preflight = record.walk = Preflight(needs, plan.preflight.mode, plan.preflight)
    preflight.request_headers, preflight.started = scope["headers"], record.started


def _settle(exchange: Exchange) -> Tally | None:
    """The usage, when an upstream answered (an answer's metered before it went out, a stream's now), to
    the features' ``settle`` in table order; then the caller gives it to the stakes."""
    record = exchange.record
    tally = exchange.tally or metered(record, exchange.preflight.needs, exchange.plan)
    if tally is not None:
        if record.clamped and record.answered is not None:  # it claimed absurd usage: cut
            exchange.services.metrics.usage_clamped.labels(record.answered.candidate.id).inc()
        for settle in exchange.hooks.settle:
            settle(exchange, tally)
    return tally


def _stopping(record: RequestRecord) -> None:
    """The server is stopping (a cancellation that is not the client's): the span still ends."""
    if record.trace is not None:
        record.status = 499
        record.trace.end(record)


def _finish(services: RequestServices, hooks: Hooks, record: RequestRecord) -> None:
    """The one end of every request, its stakes settled before: the journal (access log, events), the
    features' ``finish`` (the audit line), then the span; then its error lets go of the frames it went
    through (``errors.untangle``). Not a coroutine: a request makes none for it."""
    services.journal.finish(record)
    for finish in hooks.finish:
        finish(record)
    if record.trace is not None:
        record.trace.end(record)
    if record.error is not None:
        untangle(record.error)


@dataclass(slots=True, eq=False, repr=False)
class Exchange:
    """One request on its way through the lifecycle: everything that travels together. What the
    features' hooks read and change (``features``): ``caller``, ``target``, ``parsed``, ``preflight``,
    ``headers``, and their stakes (``stake``)."""

    services: RequestServices
    plan: RuntimePlan
    hooks: Hooks  # the plan's features' (``features``)
    surface: Surface
    headers: list[Header]
    send: Send
    record: RequestRecord  # the journal's: what answered, what it ended with
    scope: Scope
    caller: Caller  # ``ANONYMOUS`` without keys
    parsed: Parsed = field(init=False)
    target: Target = field(init=False)
    preflight: Preflight = field(init=False)
    watch: DisconnectWatch = field(init=False)
    # the server's direct writer for a stream's body, if any
    body: StreamBody | None = field(default=None, init=False)
    # an answer's usage, metered once before it goes out
    tally: Tally | None = field(default=None, init=False)
    # what features took for this request (credits, rates): settled however it ends
    stakes: list[Stake] | None = field(default=None, init=False)

    def stake(self, stake: Stake) -> None:
        """What a feature took for this request, given back (awaited) when it ends, however it ends."""
        if self.stakes is None:
            self.stakes = []
        self.stakes.append(stake)

    async def unadmitted(self, exc: Exception) -> None:
        """The request ended before its walk: the client went (499), or a refusal in its shape."""
        record, metrics = self.record, self.services.metrics
        if isinstance(exc, ClientGone):
            metrics.client_disconnects.labels(record.endpoint).inc()
            record.status = 499
        else:
            status = record.status = await self._error(exc)
            record.error = exc
            metrics.requests.labels(record.endpoint, str(status)).inc()
        if self.stakes is not None:
            for stake in self.stakes:
                await stake(None)
        _finish(self.services, self.hooks, record)

    async def _refused(self, exc: Exception) -> int:
        self.record.error = exc
        self.watch.stop()
        self.headers.extend(self.preflight.headers())
        return await self._error(exc)

    async def _error(self, exc: Exception) -> int:
        """Answer ``exc`` in the surface's shape; returns the status sent."""
        failure = failure_of(exc, self.plan)
        self.headers.extend(failure.headers)
        await send_json(self.send, failure.status, self.surface.error(failure), self.headers)
        return failure.status

    async def answer(self) -> int:
        router, parsed = self.services.router, self.parsed
        try:
            answered = await (
                router.chat(self.target, parsed.body, self.preflight, parsed.native)
                if parsed.operation == "chat"
                else router.embed(self.target, parsed.body, self.preflight)
            )
        except Exception as exc:  # gateway answers, refusals, and (logged) bugs: in the surface's shape
            return await self._refused(exc)
        self.record.answered = answered
        headers = self.headers
        self.preflight.add_headers(headers, answered.candidate.id)
        result = answered.result
        needs = self.preflight.needs  # the usage worked out once: what the answer shows, the ledger counts
        tally = self.tally = request_tally(self.record, needs, price_of(self.plan, answered.candidate.id))
        if tally.estimated and parsed.operation == "chat":  # never zeros: the estimate
            # (the record keeps the upstream's: metered as estimated)
            result = with_usage(result, estimated_usage(needs, tally.completion_tokens))
        payload = self.surface.answer(parsed, result, answered.candidate.id)
        headers.append(answered.candidate.resolved_header)
        if answered.route.worker_header is not None:
            headers.append(answered.route.worker_header)
        say_dropped(headers, answered, parsed.operation, parsed)
        self.watch.stop()
        await send_json(self.send, 200, payload, headers)
        self._observe_overhead(answered)
        return 200

    async def stream(self) -> int:
        router = self.services.router
        began = False  # once the 200 is on its way, nothing may answer again
        # a walk silent this long starts the answer anyway, and keeps it alive (runtime/request/keepalive.py)
        keepalive = Keepalive(self.send, self.plan.server.stream_keepalive_s, self._early_head)

        async def deliver(answered: Answered[ChatStream]) -> int:
            """Write the stream out; runs inside the router's hold on the slot."""
            nonlocal began
            began = True
            self.record.answered = answered
            try:
                return await self._deliver(answered, await keepalive.stop())
            finally:
                if self.record.relay_s < 0:  # the relay after the first chunk: not the gateway's own time
                    self.record.relay_s += time.perf_counter()
                await answered.result.aclose()

        try:
            return await router.chat_stream(
                self.target, self.parsed.body, deliver, self.preflight, self.parsed.native
            )
        except Exception as exc:  # gateway answers, refusals, and (logged) bugs: in the surface's shape
            if began:
                raise
            if await keepalive.stop():  # the head is out: the format's error event ends the stream
                return await self._failed_in_band(exc, keepalive)
            return await self._refused(exc)
        finally:
            keepalive.close()

    def _early_head(self) -> tuple[StreamRender, list[Header]]:
        """The render and head of a stream started before its first content: the gateway's headers,
        the format's stream headers (not yet who answers: no candidate has)."""
        render = self.surface.stream(self.parsed, "")
        return render, [*self.headers, *render.headers]

    async def _failed_in_band(self, exc: Exception, keepalive: Keepalive) -> int:
        """The whole walk failed after the head went out: its failure as the format's error event."""
        self.record.error = exc
        self.watch.stop()
        failure = failure_of(exc, self.plan)
        log.warning("stream of %s failed before its first content (%s)", self.target.label, failure.message)
        await self.send({"type": "http.response.body", "body": keepalive.error(failure.message)})
        return 200

    async def _deliver(self, answered: Answered[ChatStream], started: bool = False) -> int:
        """``started``: the head went out already (a keepalive): only the body is left to write."""
        router, send = self.services.router, self.send
        cid = answered.candidate.id
        render = self._head(answered)
        if not started:
            await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        body = self.body if self.body is not None and self.body.ready() else None
        render_chunk = render.chunk
        first = True
        record = self.record
        said = gatherer(self.target, self.parsed, answered.candidate)  # for `resume`; None: not resumed
        last: dict[str, Any] = {}
        held: list[bytes] = []  # without a StreamBody: one read's bytes, for `send`
        if body is not None:  # straight to the connection, in the upstream's read callback
            write = body.write
        else:

            def write(data: bytes) -> bool:
                held.append(data)
                return False

        def relayed(chunks: Sequence[dict[str, Any]]) -> bool:
            """The chunks of one upstream read, metered, written as the caller's bytes in one piece;
            True: the caller reads slower than the upstream sends (await the drain)."""
            nonlocal first, last
            last = chunks[-1]
            if said is not None:
                said.add(chunks)
            for chunk in chunks:
                usage = chunk.get("usage")
                if usage:  # the last chunk, asked for with `include_usage`
                    record.usage = usage
                    record.timings = chunk.get("timings")  # llama-server's prompt timings
                else:
                    record.output_chars += delta_chars(chunk)
            data = render_chunk(chunks[0]) if len(chunks) == 1 else b"".join(map(render_chunk, chunks))
            if first:
                first = False
                self._observe_overhead(answered)
                record.relay_s = -time.perf_counter()  # until the stream ends (``_relayed``)
            return bool(data) and write(data)

        async def pump(stream: ChatStream) -> None:
            if body is not None:
                await stream.relay(relayed, body.drain)
            else:
                while chunks := await stream.read():
                    relayed(chunks)
                    if held:
                        await send({"type": "http.response.body", "body": held.pop(), "more_body": True})

        try:
            await pump(answered.result)
        except Exception as exc:
            reason = router.stream_failed(answered, exc)
            log.warning("stream from %s broke after the first byte (%s)", cid, reason)
            if said is None or not resumable(exc, said) or not await self._resume(answered, said, pump):
                self.record.error = exc
                event = render.error(
                    f"the stream from {cid} broke after it had started ({reason}); the answer is incomplete"
                )
                self.watch.stop()
                await send({"type": "http.response.body", "body": event})
                return 200
        self.watch.stop()
        end = render.end() if record.usage is not None else self._estimated(render, cid, last) + render.end()
        await send({"type": "http.response.body", "body": end})
        return 200

    def _head(self, answered: Answered[ChatStream]) -> StreamRender:
        """The stream's render, its headers added to the gateway's: who answered, what was dropped (as
        ``answer`` adds them: inline in both, a request makes no call for them)."""
        headers, parsed, cid = self.headers, self.parsed, answered.candidate.id
        render = self.surface.stream(parsed, cid)
        self.preflight.add_headers(headers, cid)
        headers.append(answered.candidate.resolved_header)
        if answered.route.worker_header is not None:
            headers.append(answered.route.worker_header)
        say_dropped(headers, answered, "chat", parsed)
        headers.extend(render.headers)
        render.prompt_tokens = answered.result.prompt_tokens or self.services.learned.prompt_of(
            answered.route.endpoint.label, answered.candidate.facts_key, self.preflight.needs
        )  # the upstream's own count, else the estimate as learned from that server's answers
        return render

    def _estimated(self, render: StreamRender, cid: str, last: dict[str, Any]) -> bytes:
        """The usage chunk of a stream whose upstream sent none: the estimate (never zeros), before the
        format's end."""
        estimate = estimated_usage(self.preflight.needs, chars_tokens(self.record.output_chars))
        usage = {"id": last.get("id"), "object": "chat.completion.chunk", "created": last.get("created")}
        return render.chunk({**usage, "model": cid, "choices": [], "usage": estimate})

    async def _resume(
        self,
        answered: Answered[ChatStream],
        said: Said,
        pump: Callable[[ChatStream], Awaitable[None]],
    ) -> bool:
        """Go on from a replica of the model that broke, the answer so far as its prefill
        (``runtime/request/resume.py``); whether the whole rest of the answer was relayed."""
        target = replicas(self.target, answered.candidate)
        if target is None:
            return False
        router = self.services.router

        async def carry_on(again: Answered[ChatStream]) -> bool:
            try:
                await pump(ContinuedStream(again.result))
            except Exception as exc:  # broken again: the error event, once
                router.stream_failed(again, exc)
                return False
            finally:
                await again.result.aclose()
            log.info("stream of %s resumed on %s", answered.candidate.id, again.candidate.id)
            self.services.metrics.stream_resumed.labels(again.candidate.metric_label).inc()
            return True

        try:
            return await router.chat_stream(
                target, continued(self.parsed.body, said), carry_on, self.preflight
            )
        except Exception as exc:  # refused the prefill, or failed before its content: the first error
            log.warning("stream of %s not resumed (%s)", answered.candidate.id, type(exc).__name__)
            return False

    def _observe_overhead(self, answered: Answered[Any]) -> None:
        """The gateway's own time so far: since ``started``, less the upstream waits and slot queueing."""
        self.services.metrics.overhead_seconds.labels(self.parsed.operation).observe(
            time.perf_counter() - self.record.started - answered.upstream_s - answered.queued_s
        )
