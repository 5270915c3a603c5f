"""Runtime errors: upstream failures (mapped at the provider border) and the gateway's own answers.

The upstream client's exceptions never travel past ``interlock.runtime.upstream``: each adapter maps
every client exception to the most specific class below (``raise ... from exc``), and the router decides
by class alone whether to fall back. Messages here are safe to show a caller: they never hold an
upstream body, a header or a credential.

    InterlockError
    ├── UpstreamError                    an upstream call failed
    │   ├── TransientError               -> try the next candidate; counts towards the circuit
    │   │   ├── ConnectFailed            refused, DNS, unreachable
    │   │   ├── ConnectTimeout
    │   │   ├── FirstByteTimeout         connected, nothing came back in time
    │   │   ├── IdleTimeout              a stream fell silent past `idle` after it had started
    │   │   ├── TotalTimeout             the whole exchange ran past `total`
    │   │   ├── ProtocolFailure          server disconnected, broken HTTP, cut stream
    │   │   ├── ServerError              HTTP 5xx (52x included)
    │   │   ├── RateLimited              HTTP 429; `retry_after` seconds when the upstream said
    │   │   └── MalformedResponse        a 2xx we cannot read (not JSON, not the format's shape, a
    │   │                                stream event that is neither): the upstream failed, not the
    │   │                                request, so another candidate may answer it
    │   ├── DeterministicError           -> returned to the caller at once, no fallback
    │   │   └── ClientError              HTTP 4xx other than 429 (400, 401, 403, 404, 422, ...)
    │   └── ContextOverflow              the upstream said the prompt is over its context (any
    │                                    dialect): the candidate's context is too small, not the
    │                                    request wrong -> a candidate with a larger context; nothing
    │                                    against health; the number it gave lowers its known context
    ├── CannotServe                      an adapter's translation refused, before any network call:
    │                                    -> next candidate with the reason; nothing against health
    ├── PlanError                        the plan cannot be served (loaded/plan.py: the file, what is wrong)
    │   └── CredentialMissing            a credential variable named by the plan is not set
    └── GatewayError                     the gateway's own answer to a request
        ├── InvalidRequest               400: bad JSON, wrong types, missing fields
        ├── Unauthenticated              401: no caller key, or one the gateway does not know
        │   └── TwoKeys                  400: two different keys in one request
        ├── OperatorOnly                 403: a route showing the fleet's state, and a key that is
        │                                not an operator (only once the plan declares one)
        ├── TryLater                     429 + Retry-After: a limit of the gateway's own, for now
        │   ├── CallerLimited            the key's or tenant's rate or concurrency
        │   └── SlotUnavailable          the candidate's slot queue is full or waited too long
        ├── CreditsExhausted             402: the key's or tenant's credits for the month would be
        │                                exceeded (no Retry-After: waiting does not help)
        ├── DirectModelDenied            400: raw provider/model while the plan denies it
        ├── ModelNotFound                404: unknown alias / provider
        │   └── ModelNotAllowed          the caller's ACL does not allow the model: answered as
        │                                not found, logged as `model_not_allowed`
        ├── BodyTooLarge                 413
        ├── NoCandidateCanServe          400: every candidate's adapter refused (CannotServe), or a mix
        │                                of those and preflight misfits; names each and why
        ├── AllCandidatesFailed          503 (429 when every candidate is rate limited); Retry-After when
        │                                every candidate is on hold for a known time; bounded summary
        └── RequestDoesNotFit            400: no candidate can serve what the request needs
            ├── ContextTooLarge          code `context_length_exceeded`: estimate and largest window
            └── CapabilityMissing        code `model_not_supported`: what was needed, who lacks it

``CannotServe`` is not an ``UpstreamError``: no upstream was asked, so the candidate's health, circuit
and error counters stay untouched; it is "this candidate cannot serve this request" (``n: 2`` on
Ollama, a remote image URL, token-array embeddings), and another candidate of the chain may.

A ``GatewayError`` with ``retry_after`` set is answered with ``Retry-After`` (whole seconds, rounded up)
and ``Retry-After-Ms``, which the OpenAI SDKs read first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class InterlockError(Exception):
    """Base of every runtime error."""


class UpstreamError(InterlockError):
    """An upstream call failed. ``error_class`` is a short stable label for health reports and metrics."""

    error_class = "upstream"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class TransientError(UpstreamError):
    error_class = "transient"


class ConnectFailed(TransientError):
    error_class = "connect"


class ConnectTimeout(TransientError):
    error_class = "connect_timeout"


class FirstByteTimeout(TransientError):
    error_class = "first_byte_timeout"


class IdleTimeout(TransientError):
    """A stream said nothing for longer than its provider's ``idle`` after its first content: stalled."""

    error_class = "idle_timeout"


class TotalTimeout(TransientError):
    error_class = "total_timeout"


class ProtocolFailure(TransientError):
    error_class = "protocol"


class ServerError(TransientError):
    error_class = "server_error"
    retry_after: float | None = None  # seconds, when a 503 said (``Retry-After``)


class RateLimited(TransientError):
    error_class = "rate_limited"

    def __init__(self, message: str, *, status: int | None = 429, retry_after: float | None = None) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class DeterministicError(UpstreamError):
    error_class = "deterministic"


class ClientError(DeterministicError):
    """The upstream refused the request itself. ``message`` is the upstream's own error text, cut short;
    ``code`` its own error code (``content_policy_violation``), when it gave a plain one."""

    error_class = "client_error"

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message, status=status)
        self.code = code


class MalformedResponse(TransientError):
    """A 2xx answer that is not what its format says: the same request elsewhere may be answered well,
    and a server that answers garbage is failing (it counts towards its circuit)."""

    error_class = "malformed"


class ContextOverflow(UpstreamError):
    """The upstream refused the prompt as longer than its context. ``window`` is the context it named
    (None when it named none), ``tokens`` the prompt's size as it counted it (None when unsaid)."""

    error_class = "context_overflow"

    def __init__(
        self, message: str, *, status: int | None = 400, window: int | None = None, tokens: int | None = None
    ) -> None:
        super().__init__(message, status=status)
        self.window = window
        self.tokens = tokens


class CannotServe(InterlockError):
    """A candidate's adapter cannot carry this request (found while translating, nothing sent).

    ``param`` names the request field (``n``, ``tool_choice``, ``messages[1].content[0].image_url``);
    ``reason`` is a short stable label for the fallback metric (``unsupported_<field>``).
    """

    def __init__(self, message: str, *, param: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.reason = "unsupported_" + param.split("[", 1)[0].split(".", 1)[0]


class PlanError(InterlockError):
    """The plan cannot be served; ``str()`` says which file and what is wrong."""


class CredentialMissing(PlanError):
    """A credential variable the plan names is unset or empty."""

    def __init__(self, message: str, *, variable: str) -> None:
        super().__init__(message)
        self.variable = variable


class GatewayError(InterlockError):
    """An answer the gateway gives itself, already in OpenAI's error vocabulary."""

    status = 500
    type = "server_error"
    code: str | None = None
    audit_code: str | None = None  # what the audit log and metrics name it by, when not ``code``
    retry_after: float | None = None  # seconds; answered as Retry-After when set

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class InvalidRequest(GatewayError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class Unauthenticated(GatewayError):
    """No valid caller key. The message says what is missing, never which keys exist."""

    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class TwoKeys(Unauthenticated):
    """Two different caller keys in one request: refused as a bad request, whichever is valid."""

    status = 400
    type = "invalid_request_error"
    code = "ambiguous_api_key"


class OperatorOnly(GatewayError):
    """A route that shows every tenant's state, asked by a valid key that is not ``operator: true``."""

    status = 403
    type = "permission_error"
    code = "operator_required"


class TryLater(GatewayError):
    """429 with Retry-After: the gateway's own limit is reached for now (not an upstream's)."""

    status = 429
    type = "rate_limit_error"

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class CallerLimited(TryLater):
    """A key's or tenant's requests/min, tokens/min or concurrency is used up for now."""

    code = "caller_rate_limited"


class CreditsExhausted(GatewayError):
    """The key's or tenant's budget (``credits``) for the window is used up, or this request would pass it.

    402, not 429: a 429 tells clients (and the OpenAI SDKs, which retry it) to try again shortly, while
    credits only come back with the next window or a bigger budget; ``insufficient_quota`` is the type
    OpenAI's API uses for the same situation.
    """

    status = 402
    type = "insufficient_quota"
    code = "credits_exhausted"


class DirectModelDenied(GatewayError):
    status = 400
    type = "invalid_request_error"
    code = "direct_model_denied"


class ModelNotFound(GatewayError):
    status = 404
    type = "invalid_request_error"
    code = "model_not_found"


class ModelNotAllowed(ModelNotFound):
    """A model the caller's ACL shuts out. To the caller it is a ``ModelNotFound`` (same status, code and
    wording: a forbidden alias is not confirmed to exist); the audit log and metrics still tell them
    apart (``audit_code``)."""

    audit_code = "model_not_allowed"


class BodyTooLarge(GatewayError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class SlotUnavailable(TryLater):
    """The candidate's slot queue is full, or the request waited in it too long."""

    code = "slots_busy"


class NoCandidateCanServe(GatewayError):
    """Every candidate of the chain refused the request in translation; the message says why each."""

    status = 400
    type = "invalid_request_error"
    code = "unsupported_by_candidates"


@dataclass(frozen=True, slots=True)
class CandidateOutcome:
    """What became of one candidate in a walk that found none to answer.

    ``error_class``/``status`` are the failure that counts: the call's own when it was called, else the
    failure that put it on hold (a candidate skipped for a rate limit keeps its original 429), else the
    guard's short skip reason. ``hold_s`` is the time until it may be tried again, None when unknown.
    """

    candidate: str
    error_class: str
    status: int | None = None
    called: bool = False
    hold: str | None = None  # `rate_limited` / `circuit_open` while on hold
    hold_s: float | None = None
    cannot_serve: bool = False  # its adapter refused the request (CannotServe): no retry helps it
    retry: int = 0  # the call's place among the calls of this candidate in one walk (1: its first retry)

    def describe(self) -> str:
        text = self.error_class if self.status is None else f"{self.error_class} [{self.status}]"
        if self.retry:
            text += f" after {self.retry} {'retry' if self.retry == 1 else 'retries'}"
        if self.hold_s is None:
            return text if self.called else f"skipped ({text})"
        wait = whole_seconds(self.hold_s)
        if self.hold == "rate_limited":
            return f"{text}, holding {wait} s"
        return f"{text}, circuit open for {wait} s"


def whole_seconds(seconds: float) -> int:
    """A wait as sent in ``Retry-After`` and shown in summaries: whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(seconds))


class AllCandidatesFailed(GatewayError):
    """No candidate answered. 429 when every one is held for a rate limit, else 503; ``retry_after`` is
    the earliest time one may be tried again, set only when every candidate is on hold for a known time."""

    status = 503
    type = "server_error"
    code = "all_candidates_failed"

    def __init__(self, target: str, outcomes: Sequence[CandidateOutcome]) -> None:
        latest = {o.candidate: o for o in outcomes}.values()  # a retried candidate: its last call
        attempted = sum(1 for o in latest if o.called)
        super().__init__(
            f"no candidate of {target} could answer ({attempted} of {len(latest)} attempted): "
            + "; ".join(f"{o.candidate}: {o.describe()}" for o in latest)
        )
        self.outcomes = tuple(outcomes)  # every call, retries included (the access log's attempts)
        able = [o for o in latest if not o.cannot_serve]  # a retry can only ever reach these
        holds = [o.hold_s for o in able if o.hold_s is not None]
        if able and len(holds) == len(able):
            self.retry_after = min(holds)
            if all(o.hold == "rate_limited" for o in able):
                self.status = 429
                self.type = "rate_limit_error"
                self.code = "all_candidates_rate_limited"


class RequestDoesNotFit(GatewayError):
    """Every candidate was skipped for what the request needs (not for its health): the caller's to fix."""

    status = 400
    type = "invalid_request_error"


class ContextTooLarge(RequestDoesNotFit):
    code = "context_length_exceeded"


class CapabilityMissing(RequestDoesNotFit):
    code = "model_not_supported"


MAX_ECHO = 200  # longest upstream error text passed on to the caller
MIN_SECRET = 8  # shorter credential values are replaced only where they stand alone, never inside words
REDACTED = "[redacted]"
MAX_ECHOED_NAME = 100  # longest caller text (a model name, a path) an answer quotes


def shown(name: str) -> str:
    """A caller's text (a model name, a path) as an answer quotes it: cut short, it may be any length.
    The one rule for every echo (a 100 KB name sent to /api/show was quoted whole)."""
    return name if len(name) <= MAX_ECHOED_NAME else name[: MAX_ECHOED_NAME - 1] + "…"


def scrub(text: str, secrets: Iterable[str], limit: int = MAX_ECHO) -> str:
    """The one secret scrubber: ``text`` without any of ``secrets``, whitespace collapsed, cut to ``limit``.

    A value of ``MIN_SECRET`` characters or more is replaced wherever it occurs, longest first. A
    shorter one (a dummy key such as ``x``) is replaced only where it stands alone, between spaces or
    punctuation: replaced inside words it turned "maximum context" into "ma[redacted]imum conte[redacted]t"
    while guarding nothing. ``interlock serve`` warns at start about a credential that short.
    """
    for secret in sorted(set(secrets), key=len, reverse=True):
        if not secret or secret not in text:
            continue
        if len(secret) >= MIN_SECRET:
            text = text.replace(secret, REDACTED)
        else:
            text = re.sub(rf"(?<![\w-]){re.escape(secret)}(?![\w-])", REDACTED, text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def untangle(error: BaseException | None) -> None:
    """Drop the tracebacks of a finished request's error and of the errors it carries (its cause, its
    context, a refused candidate's error), once it has been logged and counted.

    A traceback holds the frames the error passed through, and those frames hold the error (the
    request's record, a local): a reference cycle that only the cyclic collector would free, thousands
    of objects a second under a steady stream of failing requests. Nothing reads a finished request's
    traceback: what is kept of an error is its class and its message.
    """
    seen: set[int] = set()
    pending = [error]
    while pending:
        found = pending.pop()
        if found is None or id(found) in seen:
            continue
        seen.add(id(found))
        found.__traceback__ = None
        carried = getattr(found, "error", None)
        pending.extend(
            (found.__cause__, found.__context__, carried if isinstance(carried, BaseException) else None)
        )
