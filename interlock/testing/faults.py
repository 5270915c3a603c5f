"""Faults a fake upstream can be told to inject, globally or for one model, from any thread.

A fault replaces the normal answer to the requests it matches: a model's own fault wins over the
global one, and a fault set with ``times=n`` applies to the next ``n`` matching requests only.
Refusing connections is not a fault of a request (no request ever arrives): it is a server switch,
``FakeServer.refuse_connections()``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import StrEnum

import orjson


class FaultKind(StrEnum):
    HANG = "hang"  # accept the request and never answer
    HOLD = "hold"  # accept the request and answer normally once the test sets the fault's `gate`
    SLOW_FIRST_BYTE = "slow_first_byte"  # wait `delay_s` before the headers, then answer normally
    STATUS = "status"  # answer HTTP `status` with an error body in the upstream's own shape
    DISCONNECT = "disconnect"  # read the request, then abort the connection without a byte
    CUT_STREAM = "cut_stream"  # send `after_chunks` chunks (or half a JSON body), then abort the connection
    TRUNCATE = "truncate"  # end a stream cleanly after `after_chunks` chunks, without its last chunk
    UNFINISHED = "unfinished"  # `after_chunks` chunks, then the format's terminator, no finish reason
    MALFORMED = "malformed"  # a body (or, in a stream, the chunk after `after_chunks`) that is not JSON
    STREAM_ERROR = "stream_error"  # an error event/line in a 200 stream after `after_chunks` chunks
    ENDLESS = "endless"  # a JSON body (or, in a stream, the line after `after_chunks`) that never ends
    STALL = "stall"  # a stream that sends `after_chunks` chunks, then nothing (connection open) until
    # `delay_s` passed or the test sets `gate` (neither: until the client closes), then the rest
    RECORDED = "recorded"  # a 200 with exactly `body` as `content_type`: a recorded real answer or stream
    TRICKLE = "trickle"  # the answer's body one byte at a time, `delay_s` apart: every read is in time


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected misbehaviour; build it with the class methods."""

    kind: FaultKind
    status: int = 0
    delay_s: float = 0.0
    after_chunks: int = 0
    message: str = ""
    retry_after: str | None = None
    retry_after_ms: str | None = None
    body: bytes | None = None
    content_type: str = "text/html"  # of `body` (a status's body as given, a recorded answer)
    gate: threading.Event | None = None

    @classmethod
    def hang(cls) -> Fault:
        return cls(FaultKind.HANG)

    @classmethod
    def hold(cls, gate: threading.Event) -> Fault:
        """Hold each matching request until ``gate`` is set (from any thread), then answer it normally:
        a test decides when a request ends, instead of a delay that a busy machine can outrun."""
        return cls(FaultKind.HOLD, gate=gate)

    @classmethod
    def slow_first_byte(cls, delay_s: float) -> Fault:
        return cls(FaultKind.SLOW_FIRST_BYTE, delay_s=delay_s)

    @classmethod
    def http_status(cls, status: int, message: str | None = None, *, body: bytes | None = None) -> Fault:
        """HTTP ``status`` with the upstream's error shape around ``message``, or exactly ``body``."""
        return cls(FaultKind.STATUS, status=status, message=message or f"injected HTTP {status}", body=body)

    @classmethod
    def rate_limited(
        cls, retry_after: str | None = None, *, retry_after_ms: str | None = None, message: str | None = None
    ) -> Fault:
        """HTTP 429 with the given ``Retry-After`` (seconds or an HTTP date) and ``retry-after-ms``."""
        return cls(
            FaultKind.STATUS,
            status=429,
            message=message or "Rate limit reached, please retry later",
            retry_after=retry_after,
            retry_after_ms=retry_after_ms,
        )

    @classmethod
    def disconnect(cls) -> Fault:
        return cls(FaultKind.DISCONNECT)

    @classmethod
    def cut_stream(cls, after_chunks: int) -> Fault:
        return cls(FaultKind.CUT_STREAM, after_chunks=after_chunks)

    @classmethod
    def truncate(cls, after_chunks: int) -> Fault:
        """A stream that ends well-formed at the HTTP level but before its last chunk (no [DONE]/done)."""
        return cls(FaultKind.TRUNCATE, after_chunks=after_chunks)

    @classmethod
    def unfinished(cls, after_chunks: int) -> Fault:
        """A stream that ends with its format's terminator (``data: [DONE]``, ``message_stop``) after
        ``after_chunks`` chunks, never having sent the finish reason (``finish_reason``, ``stop_reason``;
        Ollama's ``done: true`` is both, so there it is ``truncate``). llama.cpp's server ends a stream it
        drops for another request this way: the role chunk, then ``[DONE]`` (``unfinished(1)``)."""
        return cls(FaultKind.UNFINISHED, after_chunks=after_chunks)

    @classmethod
    def empty_stream(cls) -> Fault:
        """A 200 stream with no byte in its body (llama-cpp-python's server on a prompt over its context)."""
        return cls.truncate(0)

    @classmethod
    def context_overflow(cls, dialect: str, window: int, tokens: int) -> Fault:
        """The 400 an upstream of ``dialect`` (a key of ``OVERFLOWS``) answers a prompt of ``tokens``
        tokens over its context of ``window``, in that upstream's own words."""
        status, error = OVERFLOWS[dialect](window, tokens)
        return cls(FaultKind.STATUS, status=status, body=orjson.dumps(error), content_type="application/json")

    @classmethod
    def malformed(cls, after_chunks: int = 0) -> Fault:
        return cls(FaultKind.MALFORMED, after_chunks=after_chunks)

    @classmethod
    def endless(cls, after_chunks: int = 0) -> Fault:
        """A 200 whose JSON body, or stream line after ``after_chunks`` chunks, never ends: bytes keep
        coming (as fast as the client reads) until the client closes the connection."""
        return cls(FaultKind.ENDLESS, after_chunks=after_chunks)

    @classmethod
    def stall(cls, after_chunks: int, *, delay_s: float = 0.0, gate: threading.Event | None = None) -> Fault:
        """A stream that falls silent mid-answer with its connection open: ``after_chunks`` chunks, then
        not a byte until ``delay_s`` has passed or ``gate`` is set (neither: until the client closes
        it), then the rest of the stream as usual."""
        return cls(FaultKind.STALL, after_chunks=after_chunks, delay_s=delay_s, gate=gate)

    @classmethod
    def trickle(cls, delay_s: float) -> Fault:
        """A 200 whose body comes one byte every ``delay_s``: no read ever waits long, and the whole
        answer takes its length times ``delay_s`` (a client that bounds only each read waits for all)."""
        return cls(FaultKind.TRICKLE, delay_s=delay_s)

    @classmethod
    def recorded(cls, body: bytes, content_type: str = "application/json") -> Fault:
        """Answer 200 with exactly ``body``: a real provider's recorded answer (or whole stream, with
        its ``text/event-stream`` or ``application/x-ndjson`` type), so a test can prove every field of it
        survives the gateway. Not a misbehaviour, but it replaces the answer the same way."""
        return cls(FaultKind.RECORDED, body=body, content_type=content_type)

    @classmethod
    def stream_error(cls, message: str = "injected stream error", *, after_chunks: int = 0) -> Fault:
        return cls(FaultKind.STREAM_ERROR, after_chunks=after_chunks, message=message)


def _openai(window: int, tokens: int) -> tuple[int, object]:
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in "
        f"{tokens} tokens. Please reduce the length of the messages."
    )
    error = {"message": message, "type": "invalid_request_error", "param": "messages"}
    return 400, {"error": {**error, "code": "context_length_exceeded"}}


def _vllm(window: int, tokens: int) -> tuple[int, object]:
    message = (
        f"This model's maximum context length is {window} tokens. However, you requested {tokens} tokens "
        f"({tokens - 16} in the messages, 16 in the completion). Please reduce the length of the messages "
        "or completion."
    )
    return 400, {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}


def _llama_server(window: int, tokens: int) -> tuple[int, object]:
    """llama.cpp's own ``llama-server``."""
    error = {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": tokens,
        "n_ctx": window,
    }
    return 400, {"error": error}


def _llama_cpp_python(window: int, tokens: int) -> tuple[int, object]:
    """llama-cpp-python's server (``python -m llama_cpp.server``), non-streamed."""
    message = (
        f"This model's maximum context length is {window} tokens. However, you requested {tokens} tokens "
        f"({tokens} in the messages, 0 in the completion). Please reduce the length of the messages or "
        "completion."
    )
    error = {"message": message, "type": "invalid_request_error", "param": "messages"}
    return 400, {"error": {**error, "code": "context_length_exceeded"}}


def _ollama(window: int, tokens: int) -> tuple[int, object]:
    return 400, {"error": f"input length ({tokens} tokens) exceeds the model's context length ({window})"}


def _anthropic(window: int, tokens: int) -> tuple[int, object]:
    message = f"prompt is too long: {tokens} tokens > {window} maximum"
    error = {"type": "invalid_request_error", "message": message}
    return 400, {"type": "error", "error": error}


OVERFLOWS = {
    "openai": _openai,
    "vllm": _vllm,
    "llama-server": _llama_server,
    "llama-cpp-python": _llama_cpp_python,
    "ollama": _ollama,
    "anthropic": _anthropic,
}
"""Each upstream's answer to a prompt over its context: ``(status, error body)``."""


@dataclass(slots=True)
class _Entry:
    fault: Fault
    remaining: int | None  # None: until cleared


class FaultBoard:
    """The faults in force on one fake; every method is safe to call from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._global: _Entry | None = None
        self._models: dict[str, _Entry] = {}

    def set(self, fault: Fault, *, model: str | None = None, times: int | None = None) -> None:
        """Inject ``fault`` for ``model`` (all requests when None), ``times`` times or until cleared."""
        if times is not None and times < 1:
            raise ValueError(f"times must be at least 1, got {times}")
        with self._lock:
            if model is None:
                self._global = _Entry(fault, times)
            else:
                self._models[model] = _Entry(fault, times)

    def clear(self, *, model: str | None = None) -> None:
        """Clear the fault of ``model``, or every fault when ``model`` is None."""
        with self._lock:
            if model is None:
                self._global = None
                self._models.clear()
            else:
                self._models.pop(model, None)

    def take(self, model: str | None) -> Fault | None:
        """The fault that applies to one request naming ``model``, counting it against ``times``."""
        with self._lock:
            entry = self._models.get(model) if model is not None else None
            is_global = entry is None
            if entry is None:
                entry = self._global
                if entry is None:
                    return None
            if entry.remaining is not None:
                entry.remaining -= 1
                if entry.remaining == 0:
                    if is_global:
                        self._global = None
                    elif model is not None:
                        self._models.pop(model, None)
            return entry.fault
