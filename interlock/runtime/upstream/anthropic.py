"""The Anthropic adapter: OpenAI-shaped requests to the Messages API (``POST {base_url}/v1/messages``).

Translation both ways lives in ``wire.anthropic``; this module only sends. A Messages caller's own
request (``Native``) goes as it came, the model replaced, with the ``anthropic-beta`` and
``anthropic-version`` headers it came with; its answer and events come back whole (``Relayed``).
The credential goes in ``x-api-key`` with ``anthropic-version`` (the plan builds both headers, from
``interlock.common.kinds``). Status mapping is the shared one (``failures``): 429 rate limited, 529
overloaded is a 5xx (transient, the walk falls back), other 4xx deterministic.
Probe: ``GET {base_url}/v1/models``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from interlock.runtime.base.errors import CannotServe, UpstreamError
from interlock.runtime.net.transport import Transport
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.upstream.exchange import probe_endpoint, request_json, request_stream
from interlock.runtime.wire import anthropic as wire
from interlock.runtime.wire.base import ChatStream, Endpoint, Native, Relayed, relayed_body, with_headers

COUNTED = ("messages", "system", "tools", "tool_choice", "thinking")  # what count_tokens takes


class AnthropicAdapter(Adapter):
    """Speaks Anthropic's Messages API at one base URL per provider."""

    def __init__(self, client: Transport) -> None:
        self._client = client

    async def chat(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> dict[str, Any]:
        if native is None:
            payload = orjson.dumps(wire.messages_request(body, model, stream=False))
            answer = await request_json(self._client, endpoint, "POST", "/v1/messages", payload)
            return wire.chat_completion(answer, model)
        payload = orjson.dumps(relayed_body(native.body, model, stream=False))
        answer = await request_json(
            self._client, with_headers(endpoint, native), "POST", "/v1/messages", payload
        )
        return Relayed(wire.chat_completion(answer, model), answer)

    async def chat_stream(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> ChatStream:
        options = body.get("stream_options")
        include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
        if native is None:
            payload = orjson.dumps(wire.messages_request(body, model, stream=True))
        else:
            payload = orjson.dumps(relayed_body(native.body, model, stream=True))
            endpoint = with_headers(endpoint, native)
        decoder = wire.EventDecoder(model, endpoint, include_usage, relay=native is not None)
        return await request_stream(self._client, endpoint, "/v1/messages", payload, decoder)

    async def embed(self, endpoint: Endpoint, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
        refused = wire.refusal("embeddings", body)
        assert refused is not None
        raise refused

    def refusal(self, operation: str, body: Mapping[str, Any]) -> CannotServe | None:
        return wire.refusal(operation, body)

    async def count(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None, timeout_s: float
    ) -> int | None:
        """The Messages API's own count (``POST /v1/messages/count_tokens``) of the caller's own Messages
        request (``native``); None for a request of another format, or when it did not answer."""
        if native is None or native.format != "anthropic":
            return None
        asked = {k: v for k, v in native.body.items() if k in COUNTED} | {"model": model}
        try:
            answer = await request_json(
                self._client,
                with_headers(probe_endpoint(endpoint, timeout_s), native),
                "POST",
                "/v1/messages/count_tokens",
                orjson.dumps(asked),
            )
        except UpstreamError:
            return None
        counted = answer.get("input_tokens")
        return counted if type(counted) is int and 0 <= counted < 1 << 30 else None

    async def probe(self, endpoint: Endpoint, timeout_s: float) -> None:
        probe = probe_endpoint(endpoint, timeout_s)
        await request_json(self._client, probe, "GET", "/v1/models", None)  # a JSON object, else refused
