"""An in-test Adapter for router unit tests: answers from a script and records every call.

End-to-end tests use the real adapters against real fake upstreams; this one exists so the router's
walk can be checked step by step without sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from interlock.runtime.base.errors import CannotServe
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.wire.base import ChatStream, Endpoint, Native

Outcome = dict[str, Any] | Exception | list[dict[str, Any] | Exception] | float


class ListStream(ChatStream):
    def __init__(self, items: list[dict[str, Any] | Exception]) -> None:
        self.items = items
        self.closed = False
        self._read = 0  # items that read() has given

    async def _iterate(self) -> AsyncIterator[dict[str, Any]]:
        for item in self.items:
            if isinstance(item, Exception):
                raise item
            yield item

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._iterate()

    async def read(self) -> list[dict[str, Any]]:
        """One item at a time (an exception is raised when reached)."""
        if self._read == len(self.items):
            return []
        item = self.items[self._read]
        self._read += 1
        if isinstance(item, Exception):
            raise item
        return [item]

    async def aclose(self) -> None:
        self.closed = True


class ScriptedAdapter(Adapter):
    """``script[model]`` is the outcome of every call for that model: a dict answer, an exception to
    raise, a list (stream chunks; an exception inside breaks the stream), or a float (seconds to hang)."""

    def __init__(self, script: Mapping[str, Outcome], refuse: CannotServe | None = None) -> None:
        """``refuse``: what ``refusal`` answers for every request (as if the body could not be carried)."""
        self.script = dict(script)
        self.refuse = refuse
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.streams: list[ListStream] = []

    async def _outcome(self, endpoint: Endpoint, model: str, body: Mapping[str, Any]) -> Outcome:
        self.calls.append((endpoint.label, model, dict(body)))
        outcome = self.script[model]
        if isinstance(outcome, float):
            await asyncio.sleep(outcome)
            return {"hung": True}
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def chat(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> dict[str, Any]:
        outcome = await self._outcome(endpoint, model, body)
        assert isinstance(outcome, dict)
        return dict(outcome)

    async def chat_stream(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> ChatStream:
        outcome = await self._outcome(endpoint, model, body)
        assert isinstance(outcome, list)
        if isinstance(outcome[0], Exception):  # fails before the first chunk: fallback is still possible
            raise outcome[0]
        stream = ListStream(outcome)
        self.streams.append(stream)
        return stream

    async def embed(self, endpoint: Endpoint, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.chat(endpoint, model, body)

    def refusal(self, operation: str, body: Mapping[str, Any]) -> CannotServe | None:
        return self.refuse

    async def probe(self, endpoint: Endpoint, timeout_s: float) -> None:
        return None
