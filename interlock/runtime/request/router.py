"""The fallback walk: try a target's candidates in order until one answers.

For each candidate the adapter first says whether it can carry the request at all (``refusal``: a
cheap look at the body), then its guards run (a skip costs no network time): its chain, compiled once
(``guards.compiled``) and picked by its ``checks`` at plan load; an instant guard's ``verdict`` is
called as it is, the slot guard's ``admit`` awaited (``guards.steps``). Then the adapter is called with
the caller's request (or the copy a guard settled for that candidate, e.g. Ollama's ``num_ctx``) and
the outcome is classified by error class alone:

- success -> the answer; the candidate's and endpoint's circuits close;
- ``TransientError`` (connect, timeouts, protocol, 5xx, 429, a malformed answer) -> counted, tried
  again if its retry policy says so (``request/retry.py``), else the next candidate;
- ``DeterministicError`` (4xx) -> ``CandidateRefused``, returned to the caller at once;
- ``CannotServe`` (from ``refusal`` or the translation; nothing was sent) -> next candidate with the
  reason; nothing against health, a fallback with ``unsupported_<field>``;
- ``ContextOverflow`` (the upstream said the prompt is over its context, in any dialect) -> a misfit:
  next candidate, said in ``X-Interlock-Skipped``, nothing against health; the window it named lowers
  that route's known context (``FactsTable.lower_window``), so the next such request skips it at once.

Nothing left -> a 400 when no candidate can serve the request itself (the preflight's refusal when
every candidate was skipped for what the request needs, ``NoCandidateCanServe`` when each was refused
by its adapter or a misfit); else ``AllCandidatesFailed`` with one ``CandidateOutcome`` per candidate
(no bodies): one skipped for a rate limit or an open circuit keeps the error class that put it there,
and when every candidate that could serve is on hold the caller is told when the first comes back
(``Retry-After``; 429 when all are rate limited). A stream counts as answered once its first chunk
has arrived: after that nothing falls back. A guard that answers ``DEFER`` (the context guard, for a
candidate the request fits only with a lowered output limit, or only by its server's own count) puts
the candidate after the rest of the chain: the walk comes back to it once, if no later one answered.

Each candidate's ``Admission`` is released in a ``finally`` here: a slot the guards took is given back
after the call, or (streams) after the caller's ``deliver`` has written the stream out, also on
cancellation and client disconnect. No lease leaves this module.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from interlock.runtime.base.errors import (
    AllCandidatesFailed,
    CandidateOutcome,
    CannotServe,
    ContextOverflow,
    DeterministicError,
    FirstByteTimeout,
    NoCandidateCanServe,
    RateLimited,
    RequestDoesNotFit,
    TransientError,
    UpstreamError,
)
from interlock.runtime.books.facts import FactsTable
from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.learned import Learned
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.books.record import Answered, CandidateRefused
from interlock.runtime.guards import DEFER, Admission, Chains, Guard, Step, compiled, steps
from interlock.runtime.guards.ceiling import lowered_native as ceiling_of
from interlock.runtime.guards.preflight import Preflight
from interlock.runtime.loaded.tables import Candidate, RetryPolicy, Route, Target
from interlock.runtime.request.retry import SLOW, wait_before_retry
from interlock.runtime.upstream.base import Adapter, Call
from interlock.runtime.wire.base import ChatStream, Endpoint, Native

if TYPE_CHECKING:
    from interlock.runtime.fleet.signals.progress import ProgressBook

T = TypeVar("T")
R = TypeVar("R")
Attempt = Callable[[Call[Any], Target, Candidate, Route], Call[Any]]  # a feature's wrap of each call
Skip = Callable[[Candidate, str], None]  # a feature told of a candidate passed over, and why
log = logging.getLogger("interlock.router")


# The calls (``upstream.base.Call``): plain functions that hand back the adapter's coroutine, which the
# walk awaits (no coroutine of their own per call); so are ``Router.chat``, ``chat_stream`` and ``embed``.
def _chat(
    adapter: Adapter, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None
) -> Awaitable[dict[str, Any]]:
    return adapter.chat(endpoint, model, body, native)


def _stream(
    adapter: Adapter, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None
) -> Awaitable[ChatStream]:
    return adapter.chat_stream(endpoint, model, body, native)


def _embed(
    adapter: Adapter, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None
) -> Awaitable[dict[str, Any]]:
    return adapter.embed(endpoint, model, body)


class Walk:
    """One walk's running account (one per request): what each candidate came to, and the time spent.

    No ``__init__``: the walk makes it with ``Walk()`` (no Python frame) and sets its target, preflight
    and outcomes; the counts start at the class's zeros (an attribute set on the walk shadows them)."""

    target: Target
    preflight: Preflight | None
    outcomes: list[CandidateOutcome]  # also the preflight's ``attempts``: the access log's
    refusals: tuple[tuple[Candidate, CannotServe], ...] = ()  # made anew on a refusal (rare)
    upstream_s = 0.0  # the calls' time so far (and the retry waits)
    queued_s = 0.0  # the slot waits so far
    waited_s = 0.0  # the retry waits so far: together within a policy's retry_after_max
    started = 0.0  # when the call in flight (the last) began
    retries = 0  # calls of the current candidate made again (``runtime.retry``)


class Router:
    def __init__(
        self,
        health: HealthBook,
        guards: tuple[Guard, ...],
        adapters: Mapping[str, Adapter],
        metrics: Metrics,
        facts: FactsTable | None = None,
        learned: Learned | None = None,
    ) -> None:
        self.health = health
        self.chains: Chains = ()  # indexed by ``Candidate.checks``: the guards that apply to it
        self.steps: tuple[tuple[Step, ...], ...] = ()  # the same, as the walk runs them
        self.rechain(guards)
        self.adapters = adapters
        self.metrics = metrics
        # the features' seats (``features``: the tracing's, with ``--otel``), set at plan load: each
        # upstream call wrapped (its span), a candidate passed over told; None: neither
        self.attempt: Attempt | None = None
        self.skip: Skip | None = None
        self.facts = facts if facts is not None else FactsTable()  # learned windows are written here
        self.learned = learned if learned is not None else Learned()  # prompt speeds: the deadlines
        # the fleet's seat (``fleet/plug.py``, filled by ``app/parts.py`` when a plan first has workers):
        # the servers that say their progress (a read-only view of ``progress.servers``); empty without
        self.servers: Collection[str] = frozenset()
        self.progress: ProgressBook | None = None
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep  # a retry's wait (tests: their own)
        self.rng = random.Random()  # a retry's jitter

    def chat(
        self,
        target: Target,
        body: Mapping[str, Any],
        preflight: Preflight | None = None,
        native: Native | None = None,
    ) -> Coroutine[Any, Any, Answered[dict[str, Any]]]:
        """``native``: the request in the caller's own format, for a candidate of that format."""
        return self._walk(target, body, _chat, "chat", preflight, None, native)

    def chat_stream(
        self,
        target: Target,
        body: Mapping[str, Any],
        deliver: Callable[[Answered[ChatStream]], Awaitable[R]],
        preflight: Preflight | None = None,
        native: Native | None = None,
    ) -> Coroutine[Any, Any, R]:
        """Open a stream and hand it to ``deliver`` while its slot is held; the slot goes when it returns."""
        return self._walk(target, body, _stream, "chat", preflight, deliver, native)

    def embed(
        self, target: Target, body: Mapping[str, Any], preflight: Preflight | None = None
    ) -> Coroutine[Any, Any, Answered[dict[str, Any]]]:
        return self._walk(target, body, _embed, "embeddings", preflight, None)

    def rechain(self, guards: tuple[Guard, ...]) -> None:
        """The guard chain (built at plan load: again when the fleet's guards join it), compiled for
        each combination of checks."""
        self.chains = compiled(guards)
        self.steps = tuple(steps(chain) for chain in self.chains)

    def chain(self, candidate: Candidate) -> tuple[Guard, ...]:
        """The guards ``candidate`` goes through, in order."""
        return self.chains[candidate.checks]

    def stream_failed(self, answered: Answered[ChatStream], error: Exception) -> str:
        """A stream broke after its first byte reached the client: count it; return its error class."""
        candidate = answered.candidate
        if isinstance(error, UpstreamError):
            reason = error.error_class
            self.health.record_failure(
                candidate.id, answered.route.endpoint.label, error, in_plan=candidate.in_plan
            )
            self.metrics.upstream_errors.labels(candidate.metric_label, reason).inc()
        else:  # an adapter bug: logged, reported as internal
            reason = "internal"
            log.error("unexpected error in the stream from %s", candidate.id, exc_info=error)
        self.metrics.stream_aborted.labels(reason).inc()
        return reason

    async def _walk(
        self,
        target: Target,
        body: Mapping[str, Any],
        call: Call[T],
        operation: str,
        preflight: Preflight | None,
        deliver: Callable[[Answered[T]], Awaitable[R]] | None,  # None: the answer (R is Answered[T])
        native: Native | None = None,
    ) -> R:
        chains, candidates = self.steps, target.candidates
        walk = Walk()
        walk.target, walk.preflight, walk.outcomes = target, preflight, []
        if preflight is not None:  # what the access log says of a walk that ends without an answer
            preflight.attempts = walk.outcomes
        order = list(range(len(candidates)))  # a deferred candidate goes again at the end
        for position, index in enumerate(order):
            candidate = candidates[index]
            refusal = self.adapters[candidate.kind].refusal(operation, body)
            if refusal is not None:  # before the guards: no slot is queued for
                self._skipped(walk, index, refusal.reason, refusal=refusal)
                continue
            more = position + 1 < len(order)
            admission = Admission(
                candidate, candidate.routes, preflight, spill=target.spill[index], has_next=more
            )
            try:  # the slot's owner: given back however this ends
                reason: str | None = None
                try:
                    for verdict, waits in chains[candidate.checks]:
                        reason = await verdict(admission, body) if waits else verdict(admission, body)
                        if reason is not None:
                            break
                finally:
                    if admission.queued_s:
                        self._queued(walk, admission)
                if reason is not None:  # skipped; or (``DEFER``) the rest of the chain first
                    self._skipped(walk, index, reason, order)
                    continue
                route = admission.route or admission.routes[0]
                invoke = call if self.attempt is None else self.attempt(call, target, candidate, route)
                try:
                    sent, relayed, endpoint = self._prepared(admission, route, body, native)
                    while True:
                        started = walk.started = time.perf_counter()
                        if preflight is not None:
                            preflight.calling, preflight.calling_since = candidate.id, started
                        try:
                            result = await invoke(
                                self.adapters[candidate.kind], endpoint, candidate.model, sent, relayed
                            )
                            break
                        except TransientError as exc:  # counted; then tried again, or raised: moved on from
                            await self._retry_after(walk, index, admission, route, exc)
                except (CannotServe, ContextOverflow, TransientError) as exc:
                    self._moved_on(walk, index, route, exc)
                    continue
                except DeterministicError as exc:
                    raise self._refused(walk, candidate, route, exc) from exc
                answered = self._answered(walk, candidate, route, result)
                return answered if deliver is None else await deliver(answered)  # type: ignore[return-value]
            finally:
                if admission.lease is not None:
                    await admission.release()
        raise _none_left(walk)

    def _prepared(
        self, admission: Admission, route: Route, body: Mapping[str, Any], native: Native | None
    ) -> tuple[Mapping[str, Any], Native | None, Endpoint]:
        """What the candidate is called with: the body (a guard's copy, or the caller's), the caller's own
        format if it relays it (lowered to the ceiling too), the endpoint with the call's deadlines."""
        candidate, preflight = admission.candidate, admission.preflight
        sent = body if admission.body is None else admission.body
        relayed = native if native is not None and native.format in candidate.relays else None
        if relayed is not None and admission.ceiling is not None:
            relayed = ceiling_of(relayed, admission.ceiling)
        endpoint = route.endpoint
        if endpoint.label in self.servers and self.progress is not None:  # a server that says its
            endpoint = self.progress.watched(endpoint)  # progress: a no-progress first byte
        if preflight is not None:  # first_byte covers the prefill, at the speed learned there
            endpoint = self.learned.deadline(endpoint, candidate.facts_key, preflight.needs)
        return sent, relayed, endpoint

    def _answered(self, walk: Walk, candidate: Candidate, route: Route, result: T) -> Answered[T]:
        """The call answered: its time counted, its circuits closed, the walk's account closed."""
        spent = time.perf_counter() - walk.started
        upstream_s = walk.upstream_s = walk.upstream_s + spent
        preflight, metrics = walk.preflight, self.metrics
        if preflight is not None:  # no call in flight (``_left``)
            preflight.calling, preflight.walked_s = None, upstream_s
        metrics.upstream_seconds.labels(candidate.metric_label).observe(spent)
        self.health.record_success(candidate.id, route.endpoint.label, in_plan=candidate.in_plan)
        metrics.alias_resolved.labels(walk.target.metric_label, candidate.metric_label).inc()
        return Answered(candidate, route, result, upstream_s, walk.queued_s, tuple(walk.outcomes))

    def _moved_on(
        self, walk: Walk, index: int, route: Route, exc: CannotServe | ContextOverflow | TransientError
    ) -> None:
        """The candidate's call ended in a way the walk moves on from: what ``refusal`` could not see
        cheaply (``CannotServe``), a context too small, or a transient failure counted and not to be
        tried again."""
        if isinstance(exc, ContextOverflow):
            self._too_small(walk, index, route, exc)
        elif isinstance(exc, CannotServe):
            _left(walk.preflight, walk.upstream_s)
            self._skipped(walk, index, exc.reason, refusal=exc)
        else:
            _left(walk.preflight, walk.upstream_s)
            candidate = walk.target.candidates[index]
            walk.outcomes.append(self._outcome(candidate, exc.error_class, exc, walk.retries))
            self._fell_back(walk.target.candidates, index, exc.error_class)
        walk.retries = 0  # the next candidate's calls made again: none yet

    async def _retry_after(
        self, walk: Walk, index: int, admission: Admission, route: Route, exc: TransientError
    ) -> None:
        """A call failed transiently (counted, ``_failed_once``): wait before calling the candidate
        again (``runtime.retry``: the upstream asked for it, or may); ``exc`` raised again when it is
        not to be tried again."""
        wait = self._failed_once(walk, index, admission, route, exc)
        if wait is None:
            raise exc
        waited = time.perf_counter()
        await self.sleep(wait)
        walk.upstream_s += time.perf_counter() - waited
        walk.retries += 1

    def _failed_once(
        self, walk: Walk, index: int, admission: Admission, route: Route, exc: TransientError
    ) -> float | None:
        """A call failed transiently: counted against the candidate; the wait before calling it again,
        or None (move on). The walk's waits together stay within the policy's ``retry_after_max``."""
        candidate, label, progress = admission.candidate, route.endpoint.label, self.progress
        spent = self._spent(walk, candidate, exc)
        busy = (
            isinstance(exc, FirstByteTimeout)
            and progress is not None
            and progress.busy(label, route.endpoint.first_byte_s)
        )  # the server reported work in progress: never towards the circuit
        self.health.record_failure(
            candidate.id, label, exc, in_plan=candidate.in_plan, spent_s=spent, busy=busy
        )
        target = walk.target
        policy = target.retry[index] if target.retry else candidate.retry
        wait = self._retry_wait(policy, exc, walk.retries, admission, walk.preflight, spent)
        if wait is None or walk.waited_s + wait > policy.retry_after_max_s:
            return None
        walk.waited_s += wait
        self.metrics.upstream_retries.labels(candidate.metric_label, exc.error_class).inc()
        walk.outcomes.append(self._outcome(candidate, exc.error_class, exc, walk.retries))
        _left(walk.preflight, walk.upstream_s)
        return wait

    def _spent(self, walk: Walk, candidate: Candidate, exc: UpstreamError) -> float:
        """A failed call's seconds: the walk's, and counted with its error class."""
        spent = time.perf_counter() - walk.started
        walk.upstream_s += spent
        self.metrics.upstream_seconds.labels(candidate.metric_label).observe(spent)
        self.metrics.upstream_errors.labels(candidate.metric_label, exc.error_class).inc()
        return spent

    def _queued(self, walk: Walk, admission: Admission) -> None:
        """The time the guards waited for a slot: the walk's, and the worker's metric."""
        walk.queued_s += admission.queued_s
        worker = admission.route.worker if admission.route else None
        self.metrics.slot_wait_seconds.labels(worker or "").observe(admission.queued_s)

    def _skipped(
        self,
        walk: Walk,
        index: int,
        reason: str,
        order: list[int] | None = None,
        refusal: CannotServe | None = None,
    ) -> None:
        """A candidate passed over: by a guard (``reason``), or refused by its adapter (``refusal``:
        noted for the 400 a walk with none left may be); told to the features (the trace), said in the
        outcomes and the skipped header, counted as a fallback; nothing against its health. Or deferred
        by a guard (``DEFER``): it goes again after the rest of the chain; nothing counted."""
        if reason is DEFER and order is not None:
            order.append(index)
            return
        candidate = walk.target.candidates[index]
        if self.skip is not None:  # the features' (the tracing's event)
            self.skip(candidate, reason)
        if refusal is None:
            walk.outcomes.append(self._outcome(candidate, reason, None))
        else:
            walk.refusals += ((candidate, refusal),)
            walk.outcomes.append(CandidateOutcome(candidate.id, reason, cannot_serve=True))
        if walk.preflight is not None:
            walk.preflight.skipped.append(f"{candidate.id} ({reason})")
        self._fell_back(walk.target.candidates, index, reason)

    def _too_small(self, walk: Walk, index: int, route: Route, exc: ContextOverflow) -> None:
        """The upstream said the prompt is over the candidate's context: counted, learned, noted as a
        misfit, and fallen back from."""
        candidate, label, preflight = walk.target.candidates[index], route.endpoint.label, walk.preflight
        self._spent(walk, candidate, exc)
        _left(preflight, walk.upstream_s)
        if exc.window is not None:
            self.facts.lower_window(label, candidate.facts_key, exc.window)
            self.learned.counts.mark(label, candidate.facts_key)  # tried again past it after a while
        walk.outcomes.append(CandidateOutcome(candidate.id, exc.error_class, exc.status, called=True))
        if preflight is not None:
            preflight.overflowed(candidate.id, label, exc.window, exc.tokens)
        self._fell_back(walk.target.candidates, index, "context_too_small")

    def _refused(
        self, walk: Walk, candidate: Candidate, route: Route, exc: DeterministicError
    ) -> CandidateRefused:
        """A 4xx: counted against the candidate, and passed on to the caller (no fallback)."""
        self._spent(walk, candidate, exc)
        _left(walk.preflight, walk.upstream_s)
        self.health.record_failure(candidate.id, route.endpoint.label, exc, in_plan=candidate.in_plan)
        return CandidateRefused(candidate, exc)

    def _outcome(
        self, candidate: Candidate, reason: str, error: UpstreamError | None, retry: int = 0
    ) -> CandidateOutcome:
        """A skip (``error`` None: ``reason`` is the guard's) or a failed call (``retry``: its place
        among the calls of the candidate, 0 the first), with its hold if any."""
        labels = (r.endpoint.label for r in candidate.routes)
        hold = self.health.hold(candidate.id, labels, in_plan=candidate.in_plan)
        called = error is not None
        status = error.status if error is not None else None
        if hold is None:
            return CandidateOutcome(candidate.id, reason, status, called, retry=retry)
        if not called and hold.error_class is not None:  # skipped: the failure that put it on hold
            reason, status = hold.error_class, hold.status
        return CandidateOutcome(candidate.id, reason, status, called, hold.reason, hold.seconds, retry=retry)

    def _retry_wait(
        self,
        policy: RetryPolicy,
        error: TransientError,
        retries: int,
        admission: Admission,
        preflight: Preflight | None,
        spent: float,
    ) -> float | None:
        """Seconds to wait before calling the candidate again after ``error`` (``runtime.retry``);
        None: move on. Not when the failure opened its circuit, nor past the caller's deadline: the
        wait, and for a timeout the ``spent`` seconds the next call may take too, must end before it."""
        wait = wait_before_retry(policy, error, retries, last=not admission.has_next, rng=self.rng)
        if wait is None:
            return None
        candidate = admission.candidate
        hold = self.health.hold(candidate.id, (), in_plan=candidate.in_plan)
        if hold is not None and hold.reason == "circuit_open" and not isinstance(error, RateLimited):
            return None
        deadline = preflight.deadline() if preflight is not None else None
        slow = spent if isinstance(error, SLOW) else 0.0
        if deadline is not None and time.perf_counter() + wait + slow >= deadline:
            return None
        return wait

    def _fell_back(self, candidates: tuple[Candidate, ...], index: int, reason: str) -> None:
        following = candidates[index + 1].metric_label if index + 1 < len(candidates) else "none"
        self.metrics.fallback.labels(candidates[index].metric_label, following, reason).inc()


def _none_left(walk: Walk) -> Exception:
    """What the caller is told when no candidate answered: the 400 when none can serve the request
    itself, else every candidate's outcome."""
    preflight = walk.preflight
    if walk.refusals or (preflight is not None and preflight.misfits):
        unservable = _unservable(walk.target, walk.refusals, preflight)
        if unservable is not None:
            return unservable
    return AllCandidatesFailed(walk.target.label, walk.outcomes)


def _unservable(
    target: Target, refusals: tuple[tuple[Candidate, CannotServe], ...], preflight: Preflight | None
) -> RequestDoesNotFit | NoCandidateCanServe | None:
    """The 400 when no candidate can serve the request itself, else None (some failed or were skipped
    for their health: a 503). Every candidate a misfit: the preflight's own answer; refused by its
    adapter, or a mix of both: ``NoCandidateCanServe`` naming each candidate and why, in chain order."""
    ids = {candidate.id for candidate in target.candidates}
    misfits = preflight.misfits if preflight is not None else []
    if not refusals:
        return preflight.refusal(target.label, len(ids)) if preflight is not None else None
    why = {candidate.id: error.message for candidate, error in refusals}
    for misfit in misfits:
        why.setdefault(misfit.candidate, misfit.detail)
    if why.keys() != ids:
        return None
    params = {error.param for _, error in refusals} if not misfits else set()
    reasons = "; ".join(f"{cid}: {why[cid]}" for cid in dict.fromkeys(c.id for c in target.candidates))
    return NoCandidateCanServe(
        f"no candidate of {target.label} can serve this request: {reasons}",
        param=params.pop() if len(params) == 1 else None,
    )


def _left(preflight: Preflight | None, upstream_s: float) -> None:
    """No call in flight now; ``upstream_s`` spent on calls so far (for the access log of a walk that
    ends without an answer: a client gone, every candidate failed)."""
    if preflight is not None:
        preflight.calling, preflight.walked_s = None, upstream_s
