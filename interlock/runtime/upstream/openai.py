"""The OpenAI-compatible adapter: the caller's body goes through with only ``model`` replaced.

Ollama-native fields a client may send for an Ollama primary (``options``, ``keep_alive``, ``think``,
``format``, ``top_k``, ``num_ctx``, ...) never reach an OpenAI-compatible upstream, where a strict
provider would answer 400 and stop the walk: those with an OpenAI counterpart are translated (unless the
request sets the counterpart itself), the rest dropped (``fields.NATIVE_FIELDS`` says which). A body
without any of them costs one set check.

An OpenAI chat caller's body is the internal form itself: it already goes as it came; its ``Native``
form only brings the provider headers it came with (``OpenAI-Beta``), sent along. A Responses caller's
own request (``Native`` of format ``responses``, for a provider declared ``responses: true``) goes to
``{base_url}/responses`` as it came, the model replaced (``wire.openai_responses``), and its answer and
events come back whole (``Relayed``, ``RelayedChunk``).

Streams are Server-Sent Events: ``data:`` lines hold chunks until ``data: [DONE]``. A stream is
complete only once a chunk has carried a ``finish_reason``: one that ends without it, at ``[DONE]`` or
not, was cut (ProtocolFailure), never a silently truncated answer (llama.cpp's server ends a stream it
drops for another request with ``[DONE]`` and no finish reason). A 200 stream with an empty body is
what llama-cpp-python's server answers a prompt over its context: the adapter asks once more, not
streamed and for one token, and a context-length error there is raised as ``ContextOverflow``, so
the overflow rule holds streamed or not. An ``error`` object in an event (or in a 200
body) raises the matching UpstreamError.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping
from typing import Any

import orjson

from interlock.runtime.errors import ContextOverflow, MalformedResponse, ProtocolFailure, UpstreamError
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.upstream.client import UpstreamClient
from interlock.runtime.upstream.exchange import probe_endpoint, request_bytes, request_json, request_stream
from interlock.runtime.wire import openai_responses
from interlock.runtime.wire.base import ChatStream, Endpoint, Native, Relayed, with_headers
from interlock.runtime.wire.error_bodies import credentials, error_for_object
from interlock.runtime.wire.fields import OPENAI_OPTIONS, OPENAI_STRIPPED
from interlock.runtime.wire.sse import SSEEvents

_DONE = b"[DONE]"


def _payload(body: Mapping[str, Any], model: str, *, chat: bool = True) -> dict[str, Any]:
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
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise MalformedResponse("stream chunk is not valid JSON") from exc
        if not isinstance(chunk, dict):
            raise MalformedResponse("stream chunk is not a JSON object")
        if "error" in chunk and not chunk.get("choices"):
            raise error_for_object(chunk["error"], credentials(self._endpoint.headers))
        choices = chunk.get("choices")
        if (
            choices
            and isinstance(choices, list)
            and isinstance(choices[0], dict)
            and choices[0].get("finish_reason")
        ):
            self._finished = True
        out.append(chunk)


class OpenAIAdapter(Adapter):
    """POST {base_url}/chat/completions and /embeddings; probe GET {base_url}/models."""

    def __init__(self, client: UpstreamClient) -> None:
        self._client = client

    async def chat(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> dict[str, Any]:
        if native is not None:
            endpoint = with_headers(endpoint, native)
            if native.format == "responses":
                request = openai_responses.relayed_request(native.body, model, stream=False)
                answer = await request_json(
                    self._client, endpoint, "POST", "/responses", orjson.dumps(request)
                )
                return Relayed(openai_responses.completion_of(answer, model), answer)
        payload = _payload(body, model)
        payload.pop("stream", None)
        payload.pop("stream_options", None)  # OpenAI refuses stream_options without stream
        answer = await request_json(
            self._client, endpoint, "POST", "/chat/completions", orjson.dumps(payload)
        )
        return _checked(answer, "choices", endpoint)

    async def chat_stream(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> ChatStream:
        if native is not None:
            endpoint = with_headers(endpoint, native)
            if native.format == "responses":
                request = openai_responses.relayed_request(native.body, model, stream=True)
                events = openai_responses.EventDecoder(model, endpoint)
                return await request_stream(
                    self._client, endpoint, "/responses", orjson.dumps(request), events
                )
        payload = _payload(body, model)
        payload["stream"] = True
        decoder = SSEDecoder(endpoint)
        try:
            return await request_stream(
                self._client, endpoint, "/chat/completions", orjson.dumps(payload), decoder
            )
        except ProtocolFailure:
            # an empty 200 stream: llama-cpp-python's answer to a prompt over its context (a connection
            # dropped before any answer is not asked again: the upstream may have run the request)
            if decoder.empty and decoder.ended:
                await self._overflowed(endpoint, payload)
            raise

    async def _overflowed(self, endpoint: Endpoint, payload: dict[str, Any]) -> None:
        """After a 200 stream with an empty body: the same prompt once more, not streamed, for one token.
        A server that refused the stream for its context says so here (``ContextOverflow`` is raised);
        any other answer leaves the empty stream what it was (the caller re-raises it)."""
        payload = {**payload, "max_tokens": 1}
        for key in ("stream", "stream_options", "max_completion_tokens"):
            payload.pop(key, None)
        try:
            await request_json(self._client, endpoint, "POST", "/chat/completions", orjson.dumps(payload))
        except ContextOverflow:
            raise
        except UpstreamError:
            return

    async def embed(self, endpoint: Endpoint, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
        payload = _payload(body, model, chat=False)
        answer = await request_json(self._client, endpoint, "POST", "/embeddings", orjson.dumps(payload))
        return pooled(_checked(answer, "data", endpoint))

    async def probe(self, endpoint: Endpoint, timeout_s: float) -> None:
        probe = probe_endpoint(endpoint, timeout_s)
        answer = await request_json(self._client, probe, "GET", "/models", None)
        if not isinstance(answer, dict):
            raise MalformedResponse("model list is not a JSON object")

    async def signal(self, endpoint: Endpoint, path: str, timeout_s: float) -> bytes:
        """The body of ``GET <server root><path>`` (``/metrics``, llama.cpp's ``/slots``): the root is the
        worker's URL less a trailing ``/v1``, where those servers serve them."""
        root = endpoint.url.rstrip("/")
        root = root[:-3] if root.endswith("/v1") else root
        probe = dataclasses.replace(probe_endpoint(endpoint, timeout_s), url=root)
        return await request_bytes(self._client, probe, "GET", path, None)


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


def _checked(answer: Any, key: str, endpoint: Endpoint) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise MalformedResponse("response is not a JSON object")
    if key not in answer:
        if "error" in answer:
            raise error_for_object(answer["error"], credentials(endpoint.headers))
        raise MalformedResponse(f"response has no {key!r}")
    return answer
