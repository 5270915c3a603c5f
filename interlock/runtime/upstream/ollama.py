"""The Ollama adapter: OpenAI-shaped requests to one worker's native API (/api/chat, /api/embed).

The native API, not Ollama's /v1, because only it can set ``num_ctx`` and other options per request.
Translation both ways lives in ``wire.ollama``; this module only sends. An Ollama caller's own
request (``Native``) goes as it came but for the fields the gateway owns (``wire.relayed_request``),
and its answer and lines come back whole (``Relayed``). A request Ollama cannot carry
raises ``CannotServe`` from the translation, before anything is sent. Probe: GET /api/tags.
``metadata`` fetches /api/show, /api/ps and /api/tags for the metadata fetcher, ``load`` warms a model for
placement (both outside the request path).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from interlock.runtime.base.errors import CannotServe, MalformedResponse
from interlock.runtime.net.transport import Transport
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.upstream.exchange import probe_endpoint, request_json, request_stream
from interlock.runtime.wire import ollama as wire
from interlock.runtime.wire.base import ChatStream, Endpoint, Native, Relayed

SpeedSink = Callable[[str, str, Mapping[str, Any]], None]
"""``(endpoint label, model as Ollama names it, Ollama's final message)`` of a finished chat."""


class OllamaAdapter(Adapter):
    """Speaks to one Ollama worker per endpoint (``endpoint.url`` is the worker's URL).

    ``speeds``, when set, gets the output figures of every finished chat (non-streamed or streamed):
    what worker scoring learns tokens/s from.
    """

    def __init__(self, client: Transport) -> None:
        self._client = client
        self.speeds: SpeedSink | None = None

    async def chat(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> dict[str, Any]:
        request = (
            wire.chat_request(body, model, stream=False)
            if native is None
            else wire.relayed_request(native.body, body, model, stream=False)
        )
        answer = await request_json(self._client, endpoint, "POST", "/api/chat", orjson.dumps(request))
        completion = wire.chat_completion(answer, model, body.get("parallel_tool_calls") is False)
        if self.speeds is not None:
            self.speeds(endpoint.label, _named(model), answer)
        return completion if native is None else Relayed(completion, answer)

    async def chat_stream(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> ChatStream:
        request = (
            wire.chat_request(body, model, stream=True)
            if native is None
            else wire.relayed_request(native.body, body, model, stream=True)
        )
        payload = orjson.dumps(request)
        options = body.get("stream_options")
        include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
        one_call = body.get("parallel_tool_calls") is False and native is None
        decoder = wire.NDJSONDecoder(
            model, include_usage, endpoint.headers, one_call, relay=native is not None
        )
        sink = self.speeds
        if sink is not None:
            label, named = endpoint.label, _named(model)
            decoder.on_done = lambda last: sink(label, named, last)
        return await request_stream(self._client, endpoint, "/api/chat", payload, decoder)

    async def embed(self, endpoint: Endpoint, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
        payload = orjson.dumps(wire.embed_request(body, model))
        answer = await request_json(self._client, endpoint, "POST", "/api/embed", payload)
        return wire.embeddings(answer, model, body.get("encoding_format"))

    def refusal(self, operation: str, body: Mapping[str, Any]) -> CannotServe | None:
        return wire.refusal(operation, body)

    async def probe(self, endpoint: Endpoint, timeout_s: float) -> None:
        probe = probe_endpoint(endpoint, timeout_s)
        answer = await request_json(self._client, probe, "GET", "/api/tags", None)
        if not isinstance(answer.get("models"), list):
            raise MalformedResponse("/api/tags has no model list")

    async def metadata(self, endpoint: Endpoint, path: str, model: str | None, timeout_s: float) -> Any:
        """The JSON answer of ``GET /api/tags``, ``GET /api/ps`` or (with ``model``) ``POST /api/show``."""
        probe = probe_endpoint(endpoint, timeout_s)
        if model is None:
            return await request_json(self._client, probe, "GET", path, None)
        return await request_json(self._client, probe, "POST", path, orjson.dumps({"model": model}))

    async def load(self, endpoint: Endpoint, model: str, keep_alive_s: int, num_ctx: int | None) -> Any:
        """Load ``model`` and keep it ``keep_alive_s`` seconds (-1: forever): ``POST /api/generate``
        without a prompt, which Ollama answers once the model is in memory with ``done_reason: "load"``
        (the warm-up, outside the request path). ``num_ctx`` is the context the gateway's requests send
        there: a load with another one would be reloaded by the first request."""
        body: dict[str, Any] = {"model": model, "keep_alive": keep_alive_s, "stream": False}
        if num_ctx is not None:
            body["options"] = {"num_ctx": num_ctx}
        return await request_json(self._client, endpoint, "POST", "/api/generate", orjson.dumps(body))


def _named(model: str) -> str:
    """The model as Ollama names it in /api/ps (``patterns.ollama_name``; not imported: the adapter layer
    does not import the plan)."""
    return model if ":" in model else f"{model}:latest"
