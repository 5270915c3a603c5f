"""What one request leaves behind while it runs: its ``RequestRecord``, the candidate that answered
(``Answered``) or refused (``CandidateRefused``), and how both read in logs."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from interlock.runtime.base.errors import CandidateOutcome, DeterministicError, GatewayError, UpstreamError
from interlock.runtime.loaded.callers import ANONYMOUS, Caller

if TYPE_CHECKING:
    from interlock.runtime.loaded.tables import Candidate, Route, Target

T = TypeVar("T")


class Span(Protocol):
    """A request's span (``features/tracing/otel.py::RequestTrace``), ended once with the finished record."""

    def end(self, record: RequestRecord) -> None: ...


class Walked(Protocol):
    """What a walk leaves for the access log when it ends without an answer (``Preflight`` is one)."""

    attempts: list[CandidateOutcome] | None  # its calls that failed, its skips
    calling: str | None  # the candidate called when it ended (a client gone mid-call), else None
    calling_since: float  # since when (``time.perf_counter()``)
    walked_s: float  # the seconds its finished calls took


class Surfaced(Protocol):
    """What the access log names a request's surface by (``surfaces.base.Surface`` is one)."""

    name: str  # the wire format: `openai`, `responses`, `anthropic`, `ollama`
    route: str  # its endpoint: `chat`, `embeddings`, `responses`, `messages`, `api/chat`, ...


class RequestRecord:
    """Filled by the request path as it goes; read only by ``Journal.finish``."""

    __slots__ = (
        "answered",
        "caller",
        "clamped",
        "endpoint",
        "error",
        "id",
        "output_chars",
        "relay_s",
        "started",
        "status",
        "stream",
        "surface",
        "target",
        "timings",
        "trace",
        "usage",
        "walk",
        "wall",
    )

    def __init__(self, endpoint: str, rid: bytes) -> None:
        self.endpoint = endpoint
        self.id = rid
        self.started = time.perf_counter()
        self.wall = time.time()
        self.status = 0
        self.stream = False
        self.target: Target | None = None
        self.answered: Answered[Any] | None = None
        self.error: BaseException | None = None
        self.caller: Caller = ANONYMOUS  # who called (``callers.Caller``): set before the body is read
        self.usage: Any = None  # a stream's usage chunk, when the upstream sent one
        self.timings: Any = None  # a stream's `timings` beside its usage (llama-server), when sent
        self.output_chars = 0  # a stream's text so far (the estimate when no usage came)
        self.clamped = False  # the upstream's usage claimed more than metering's bound (it was cut)
        self.trace: Span | None = None  # the request's span, when tracing is on
        self.surface: Surfaced | None = None  # the wire format it came in (None: `openai`, `endpoint`)
        self.walk: Walked | None = None  # its walk, when it got that far
        self.relay_s = 0.0  # a stream: the seconds from its first chunk to its end


def error_class(error: BaseException | None) -> str | None:
    """A short stable label for what a request ended with (no message: messages may quote callers)."""
    if error is None:
        return None
    if isinstance(error, GatewayError):
        return error.audit_code or error.code or type(error).__name__
    if isinstance(error, CandidateRefused):  # a 4xx or unreadable answer, passed on to the caller
        return error.error.error_class
    if isinstance(error, UpstreamError):
        return error.error_class
    return "internal"


def usage_of(record: RequestRecord) -> dict[str, int] | None:
    """The token counts the upstream reported: the answer's ``usage``, or a stream's usage chunk."""
    answered = record.answered
    if answered is None:
        return None
    if record.stream:
        return _counts(record.usage)
    result = answered.result
    return _counts(result.get("usage") if isinstance(result, dict) else None)


def _counts(usage: Any) -> dict[str, int] | None:
    if not isinstance(usage, dict):
        return None
    kept = {
        k: v
        for k in ("prompt_tokens", "completion_tokens", "total_tokens")
        if isinstance(v := usage.get(k), int)
    }
    return kept or None


class CandidateRefused(Exception):
    """A candidate answered with a deterministic error: it goes back to the caller, no fallback."""

    def __init__(self, candidate: Candidate, error: DeterministicError) -> None:
        super().__init__(error.message)
        self.candidate = candidate
        self.error = error


@dataclass(slots=True)
class Answered(Generic[T]):
    """The candidate that answered, its answer, and the time spent waiting outside the gateway."""

    candidate: Candidate
    route: Route
    result: T
    upstream_s: float
    queued_s: float
    attempts: tuple[CandidateOutcome, ...] = ()  # the candidates passed over before this one


MAX_LABEL = 120  # a raw provider/model label comes from the caller: shown cut short


def label(text: str) -> str:
    """A target's label as the journal shows it: a raw provider/model comes from the caller, cut short."""
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"
