"""The OpenAI-compatible adapter: the caller's body goes through with only ``model`` replaced.

What the body becomes (Ollama-native fields translated or dropped), how an answer is checked and how
the SSE stream is read are the format's rules, in ``wire.openai_chat``; this module only sends.

An OpenAI chat caller's body is the internal form itself: it already goes as it came; its ``Native``
form only brings the provider headers it came with (``OpenAI-Beta``), sent along. A Responses caller's
own request (``Native`` of format ``responses``, for a provider declared ``responses: true``) goes to
``{base_url}/responses`` as it came, the model replaced (``wire.openai_responses``), and its answer and
events come back whole (``Relayed``, ``RelayedChunk``).

A 200 stream with an empty body is what llama-cpp-python's server answers a prompt over its context:
the adapter asks once more, not streamed and for one token, and a context-length error there is raised
as ``ContextOverflow``, so the overflow rule holds streamed or not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from interlock.runtime.base.errors import ContextOverflow, ProtocolFailure, UpstreamError
from interlock.runtime.net.transport import Transport
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.upstream.exchange import (
    LineDecoder,
    probe_endpoint,
    request_bytes,
    request_json,
    request_stream,
)
from interlock.runtime.wire.base import ChatStream, Endpoint, Native, Relayed, relayed_body, with_headers
from interlock.runtime.wire.openai_chat import SSEDecoder, checked, pooled, upstream_request

NOT_SERVED = "a Responses request, and no plan this adapter served had the Responses surface"
Counter = Callable[[Transport, Endpoint, dict[str, Any]], Awaitable[int | None]]
"""A server's own tokenizer asked for a prompt's tokens (``upstream.tokenize.Tokenizers.count``)."""


@dataclass(frozen=True, slots=True)
class ResponsesRelay:
    """What a Responses caller's own request relayed to ``{base_url}/responses`` needs of its format
    (``wire.openai_responses``): the answer as a chat completion, the stream's decoder."""

    completion_of: Callable[[Any, str], dict[str, Any]]
    events: Callable[[str, Endpoint], LineDecoder]


class OpenAIAdapter(Adapter):
    """POST {base_url}/chat/completions and /embeddings; probe GET {base_url}/models."""

    def __init__(self, client: Transport) -> None:
        self._client = client
        self._relay: ResponsesRelay | None = None  # once a plan serves Responses (``serve``)
        self._counter: Counter | None = None  # once a plan serves count_tokens (``serve``)

    def serve(self, surfaces: frozenset[str]) -> None:
        """The Responses relay (``wire.openai_responses``) for a plan serving ``responses``, the servers'
        tokenizers (``upstream.tokenize``) for one serving ``anthropic`` (``count_tokens``): imported at
        plan load, kept after; a plan serving neither imports neither."""
        if "responses" in surfaces and self._relay is None:
            from interlock.runtime.wire import openai_responses

            self._relay = ResponsesRelay(openai_responses.completion_of, openai_responses.EventDecoder)
        if "anthropic" in surfaces and self._counter is None:
            from interlock.runtime.upstream.tokenize import Tokenizers

            self._counter = Tokenizers().count  # which tokenizer each server speaks, learned

    async def chat(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> dict[str, Any]:
        if native is not None:
            endpoint = with_headers(endpoint, native)
            if native.format == "responses":
                relay = self._relay
                if relay is None:
                    raise ProtocolFailure(NOT_SERVED)
                request = relayed_body(native.body, model, stream=False)
                answer = await request_json(
                    self._client, endpoint, "POST", "/responses", orjson.dumps(request)
                )
                return Relayed(relay.completion_of(answer, model), answer)
        payload = upstream_request(body, model)
        payload.pop("stream", None)
        payload.pop("stream_options", None)  # OpenAI refuses stream_options without stream
        answer = await request_json(
            self._client, endpoint, "POST", "/chat/completions", orjson.dumps(payload)
        )
        return checked(answer, "choices", endpoint.headers)

    async def chat_stream(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> ChatStream:
        if native is not None:
            endpoint = with_headers(endpoint, native)
            if native.format == "responses":
                relay = self._relay
                if relay is None:
                    raise ProtocolFailure(NOT_SERVED)
                request = relayed_body(native.body, model, stream=True)
                events = relay.events(model, endpoint)
                return await request_stream(
                    self._client, endpoint, "/responses", orjson.dumps(request), events
                )
        payload = upstream_request(body, model)
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
        payload = upstream_request(body, model, chat=False)
        answer = await request_json(self._client, endpoint, "POST", "/embeddings", orjson.dumps(payload))
        return pooled(checked(answer, "data", endpoint.headers))

    async def probe(self, endpoint: Endpoint, timeout_s: float) -> None:
        probe = probe_endpoint(endpoint, timeout_s)
        await request_json(self._client, probe, "GET", "/models", None)  # a JSON object, else refused

    async def count(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None, timeout_s: float
    ) -> int | None:
        """The chat prompt's tokens by the server's own tokenizer: llama-server's ``/apply-template``
        then ``/tokenize`` (its chat template rendered, special tokens added, as a chat request is),
        else vLLM's and SGLang's ``/tokenize`` of the messages (``count``). Which one a server speaks is
        learned at its first answer; a server with neither (404, 405, 501: a cloud) is not asked again
        for ``NO_TOKENIZER_S``, one whose tokenizer failed otherwise not for ``FAILED_S``."""
        counter = self._counter
        if counter is None:  # no plan served count_tokens: no tokenizer is asked
            return None
        probe = dataclasses.replace(probe_endpoint(endpoint, timeout_s), url=_root(endpoint.url))
        payload = upstream_request(body, model)
        for key in ("stream", "stream_options", "max_tokens", "max_completion_tokens"):
            payload.pop(key, None)
        return await counter(self._client, probe, payload)

    async def signal(self, endpoint: Endpoint, path: str, timeout_s: float) -> bytes:
        """The body of ``GET <server root><path>`` (``/metrics``, llama.cpp's ``/slots``): the root is the
        worker's URL less a trailing ``/v1``, where those servers serve them."""
        probe = dataclasses.replace(probe_endpoint(endpoint, timeout_s), url=_root(endpoint.url))
        return await request_bytes(self._client, probe, "GET", path, None)


def _root(url: str) -> str:
    """A server's root: the worker's URL less a trailing ``/v1`` (where llama.cpp, vLLM and SGLang
    serve ``/metrics``, ``/slots``, ``/tokenize``)."""
    root = url.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root
