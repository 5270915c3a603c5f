"""OpenAI Chat Completions (and Embeddings), both sides: the internal form's own shape.

The client side: error bodies ``{"error": {"message", "type", "param", "code"}}`` (every OpenAI-shaped
answer of the gateway's, its cold endpoints and canned answers included), the stream renderer (chunks
as ``data:`` events, ``data: [DONE]`` at the end, or one error event and no ``[DONE]`` when it breaks
after it started). The upstream side: the caller's body for an OpenAI-compatible upstream (``model``
replaced, Ollama-native fields translated or dropped), an answer checked, per-token embeddings pooled,
the SSE stream decoded into chunks. And the readers every other format's module uses (tool-call
arguments, ids, the first choice, reasoning, cached tokens).

Ollama-native fields a client may send for an Ollama primary (``options``, ``keep_alive``, ``think``,
``format``, ``top_k``, ``num_ctx``, ...) never reach an OpenAI-compatible upstream, where a strict
provider would answer 400 and stop the walk: those with an OpenAI counterpart are translated (unless the
request sets the counterpart itself), the rest dropped (``fields.NATIVE_FIELDS`` says which). A body
without any of them costs one set check.

Streams are Server-Sent Events: ``data:`` lines hold chunks until ``data: [DONE]``. A stream is
complete only once a chunk has carried a ``finish_reason``: one that ends without it, at ``[DONE]`` or
not, was cut (ProtocolFailure), never a silently truncated answer (llama.cpp's server ends a stream it
drops for another request with ``[DONE]`` and no finish reason). An ``error`` object in an event (or in
a 200 body) raises the matching UpstreamError.
"""

from __future__ import annotations

import abc
import random
from collections import deque
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import orjson

from interlock.runtime.base.asgi import Header, json_object
from interlock.runtime.base.errors import MalformedResponse, ProtocolFailure
from interlock.runtime.wire.base import Endpoint, RelayedChunk, StreamRender
from interlock.runtime.wire.error_bodies import credentials, error_for_object
from interlock.runtime.wire.fields import OPENAI_OPTIONS, OPENAI_STRIPPED
from interlock.runtime.wire.sse import SSE_HEADERS, SSEEvents

NO_EXTRAS: Mapping[str, Any] = MappingProxyType({})  # a request whose format keeps nothing for its answers
DONE = b"data: [DONE]\n\n"
_DONE = b"[DONE]"


_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}


def error_type(status: int) -> str:
    """OpenAI's error ``type`` for a refusal of ``status`` (another 4xx: ``invalid_request_error``)."""
    return _ERROR_TYPES.get(status, "invalid_request_error")


def error_body(
    message: str,
    type_: str,
    *,
    param: str | None = None,
    code: str | None = None,
    gateway_code: str | None = None,
) -> bytes:
    """OpenAI's error body; ``gateway_code``: interlock's own class beside an upstream's own ``code``
    (``interlock_code``), when the two differ."""
    error = {"message": message, "type": type_, "param": param, "code": code}
    if gateway_code is not None:
        error["interlock_code"] = gateway_code
    return orjson.dumps({"error": error})


class ChunkEvents(StreamRender):
    """Chunks as ``data:`` events, the model named as the caller's candidate; the usage chunk only when
    the caller asked for it itself (``usage``). Where the gateway asked for it (the usage ledger), what
    else that chunk carries goes to the caller on the chunk before it, as the upstream would have put it
    there unasked: llama-server's ``timings`` ride on the last chunk, the usage chunk when there is one,
    else the finish chunk. So the finish chunk waits for the next one (or the end)."""

    __slots__ = ("_cid", "_held", "_usage")
    headers: tuple[Header, ...] = SSE_HEADERS

    def __init__(self, cid: str, usage: bool) -> None:
        self._cid = cid
        self._usage = usage  # the caller asked for the usage chunk
        self._held: dict[str, Any] | None = None  # the finish chunk, until the usage chunk's extras

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        if not self._usage:
            choices = chunk.get("choices")
            if not choices and "usage" in chunk:  # asked for by the gateway, not by the caller
                return self._release(chunk)
            if choices and choices[0].get("finish_reason") is not None:
                out = self._release(None)
                self._held = chunk
                return out
        chunk["model"] = self._cid
        return b"data: %b\n\n" % orjson.dumps(chunk)

    def _release(self, usage_chunk: dict[str, Any] | None) -> bytes:
        """The held finish chunk, with what ``usage_chunk`` carries besides its usage and choices."""
        held = self._held
        if held is None:
            return b""
        self._held = None
        for key, value in usage_chunk.items() if usage_chunk is not None else ():
            if key not in held and key not in ("usage", "choices"):
                held[key] = value
        held["model"] = self._cid
        return b"data: %b\n\n" % orjson.dumps(held)

    def end(self) -> bytes:
        return self._release(None) + DONE

    def error(self, message: str) -> bytes:
        return self._release(None) + b"data: %b\n\n" % error_body(
            message, "server_error", code="stream_aborted"
        )


class TranslatedEvents(StreamRender):
    """The event sequence of another format, from OpenAI chunks: its opening events before the first
    delta, each delta translated, the open part closed and the closing events at the end; the last
    finish reason and the usage kept as the chunks pass. A same-format relay's events (``RelayedChunk``)
    go out as they came (``_relay``), and then the upstream's own closing events went by too."""

    __slots__ = ("_finish", "_model", "_relayed", "_started", "_usage")

    def __init__(self, model: str | None) -> None:
        self._model = model  # the name the caller's events give back
        self._relayed = False
        self._started = False
        self._finish: str | None = None
        self._usage: Any = None

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        if type(chunk) is RelayedChunk:
            self._relayed = True
            return self._relay(chunk.native, chunk.raw)
        out: list[bytes] = []
        if not self._started:
            self._started = True
            self._start(out)
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
            self._translate(choice.get("delta") or {}, out)
        return b"".join(out)

    def end(self) -> bytes:
        if self._relayed:  # the upstream's own closing events went by
            return b""
        out: list[bytes] = []
        self._close(out)
        self._end(out)
        return b"".join(out)

    @abc.abstractmethod
    def _relay(self, event: dict[str, Any], raw: bytes) -> bytes:
        """A relayed upstream event (parsed, and as it came) as the caller gets it."""

    @abc.abstractmethod
    def _start(self, out: list[bytes]) -> None:
        """The opening events."""

    @abc.abstractmethod
    def _translate(self, delta: dict[str, Any], out: list[bytes]) -> None:
        """One choice's delta as events."""

    @abc.abstractmethod
    def _close(self, out: list[bytes]) -> None:
        """The open part's closing events (none when no part is open)."""

    @abc.abstractmethod
    def _end(self, out: list[bytes]) -> None:
        """The closing events, after the last part is closed."""


# -- the upstream side -----------------------------------------------------------------------------


def upstream_request(body: Mapping[str, Any], model: str, *, chat: bool = True) -> dict[str, Any]:
    """The caller's body for an OpenAI-compatible upstream: ``model`` replaced, native fields translated
    (chat) or dropped (embeddings)."""
    payload = dict(body)
    payload["model"] = model
    if not OPENAI_STRIPPED.isdisjoint(payload):
        if chat:
            _translate_native(payload)
        for key in OPENAI_STRIPPED.intersection(payload):
            del payload[key]
    return payload


def _translate_native(payload: dict[str, Any]) -> None:
    options = payload.get("options")
    options = options if isinstance(options, Mapping) else {}
    for key in OPENAI_OPTIONS[:-1]:  # num_predict: below
        if payload.get(key) is None and options.get(key) is not None:
            payload[key] = options[key]
    limit = payload.get("num_predict", options.get("num_predict"))
    if (
        isinstance(limit, int)
        and limit > 0  # Ollama's -1 (no limit) and -2 (fill the context) have no counterpart
        and payload.get("max_tokens") is None
        and payload.get("max_completion_tokens") is None
    ):
        payload["max_tokens"] = limit
    native_format = payload.get("format")
    if native_format is not None and payload.get("response_format") is None:
        if native_format == "json":
            payload["response_format"] = {"type": "json_object"}
        elif isinstance(native_format, Mapping):
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": native_format},
            }


def checked(answer: dict[str, Any], key: str, headers: Mapping[str, str]) -> dict[str, Any]:
    """An upstream's answer (a JSON object: ``asgi.json_object``) holding ``key`` (``choices``,
    ``data``) in its shape: a list of objects, and for ``choices`` at least one, each with a
    ``message`` object. An ``error`` object in it instead raises the matching UpstreamError
    (``headers``' credentials masked), anything else MalformedResponse (the walk falls back)."""
    if key not in answer:
        if "error" in answer:
            raise error_for_object(answer["error"], credentials(headers))
        raise MalformedResponse(f"response has no {key!r}")
    items = answer[key]
    if type(items) is not list:  # (loops, not `all` over a generator: this runs on every answer)
        raise MalformedResponse(f"response's {key!r} is not a list of objects")
    for item in items:
        if type(item) is not dict:
            raise MalformedResponse(f"response's {key!r} is not a list of objects")
    if key == "choices":
        if not items:
            raise MalformedResponse("response's 'choices' hold no message")
        for choice in items:
            if type(choice.get("message")) is not dict:
                raise MalformedResponse("response's 'choices' hold no message")
    return answer


def pooled(answer: dict[str, Any]) -> dict[str, Any]:
    """One vector per input: llama.cpp's server answers some models (no pooling in the GGUF, e.g.
    SmolLM2) with one vector per token, a list of lists that no OpenAI or Ollama client reads. Those are
    pooled by their mean, the pooling llama.cpp itself applies with ``--pooling mean`` and what
    sentence-embedding models are mostly trained for; an answer already one vector per input is kept as is.
    """
    data = answer.get("data")
    if type(data) is not list:
        return answer
    for item in data:
        vectors = item.get("embedding") if type(item) is dict else None
        if type(vectors) is list and vectors and type(vectors[0]) is list:
            if not all(type(v) is list and len(v) == len(vectors[0]) for v in vectors):
                raise MalformedResponse("per-token embeddings of different lengths")
            count = len(vectors)
            item["embedding"] = [sum(column) / count for column in zip(*vectors, strict=True)]
    return answer


class SSEDecoder(SSEEvents):
    """OpenAI's event stream to chunk dicts; complete after a chunk with a finish reason (``[DONE]``
    without one is a cut stream)."""

    __slots__ = ("_finished", "done", "empty", "ended")

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint)
        self._finished = False  # a chunk with a finish_reason has arrived
        self.done = False
        self.empty = True  # no event at all so far
        self.ended = False  # a 2xx answer's body ended (not: the connection failed before an answer)

    def end(self, out: deque[dict[str, Any]]) -> None:
        self.ended = True
        self.flush(out)
        if not self.done and not self._finished:
            raise ProtocolFailure("stream ended before its last chunk")
        self.done = True

    def _dispatch(self, data: bytes, out: deque[dict[str, Any]]) -> None:
        self.empty = False
        if data == _DONE:
            if not self._finished:
                raise ProtocolFailure("stream ended at [DONE] without a finish reason")
            self.done = True
            return
        chunk = json_object(data, MalformedResponse, "stream chunk")
        choices = chunk.get("choices")
        if not choices:
            if "error" in chunk:
                self._refused(chunk["error"])
        elif type(choices) is list and type(choices[0]) is dict and choices[0].get("finish_reason"):
            self._finished = True
        out.append(chunk)


# -- readers every format uses ---------------------------------------------------------------------


def call_arguments(arguments: Any) -> Any:
    """A tool call's ``arguments`` as the object they encode: a JSON string parsed (a blank one is
    ``{}``), anything else as it is (``None`` is ``{}``). Raises ``ValueError`` for a string that is
    not JSON: each caller decides what that means (a client's answer gets ``{}``, a request to an
    upstream that takes objects cannot be carried)."""
    if isinstance(arguments, str):
        return orjson.loads(arguments) if arguments.strip() else {}
    return {} if arguments is None else arguments


def completion_id() -> str:
    """A fresh ``chat.completion`` id (for answers translated from another format)."""
    return f"chatcmpl-{random.getrandbits(96):024x}"


def chunk_head(model: str) -> dict[str, Any]:
    """What every ``chat.completion.chunk`` of one translated stream shares (its id, its model)."""
    return {"id": completion_id(), "object": "chat.completion.chunk", "created": 0, "model": model}


def delta_chunk(head: Mapping[str, Any], delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """One chunk of the stream ``head`` names, holding one choice's ``delta``."""
    return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def named(name: str, dropped: list[str]) -> None:
    """``name`` in ``dropped`` (what a request's internal form cannot carry), once."""
    if name not in dropped:
        dropped.append(name)


def first_choice(result: Mapping[str, Any]) -> dict[str, Any]:
    """The first choice of an OpenAI-shaped answer (empty when there is none)."""
    choice: dict[str, Any] = (result.get("choices") or [{}])[0]
    return choice


def reasoning(part: Mapping[str, Any]) -> Any:
    """The reasoning text of an answer's message or a stream's delta: providers name it either way."""
    return part.get("reasoning") or part.get("reasoning_content")


def cached_tokens(usage: Mapping[str, Any]) -> int:
    """How much of an OpenAI usage's prompt was read from the provider's cache (0 when unsaid)."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return cached if not isinstance(cached, bool) and isinstance(cached, int) else 0
