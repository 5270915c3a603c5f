"""The provider border: what the router asks of an upstream, whatever its wire format.

Requests and responses cross this border in the core types of ``wire.base`` (``Endpoint``, ``Native``,
``Relayed``, ``RelayedChunk``, ``ChatStream``). Each adapter translates to its own wire format and hands
its HTTP exchanges to ``exchange.py``, which sends one ``net.transport.Request`` through the
``Transport`` the adapter was given and maps every transport failure to ``interlock.runtime.base.errors``;
no adapter imports a framing module (``net/http1.py``, ``net/client.py``: tests/runtime/net prove it),
and nothing of the transport leaks past this package.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

from interlock.common.kinds import KINDS, listed
from interlock.runtime.base.errors import CannotServe
from interlock.runtime.base.mypyc_marks import mypyc_attr
from interlock.runtime.net.transport import Transport
from interlock.runtime.wire.base import ChatStream, Endpoint, Native
from interlock.schema.plan import SURFACES


@mypyc_attr(allow_interpreted_subclasses=True)  # test doubles subclass it (runtime/base/mypyc_marks.py)
class Adapter(abc.ABC):
    """Speaks one wire format. Stateless apart from the shared HTTP client it is given."""

    @abc.abstractmethod
    async def chat(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> dict[str, Any]:
        """A non-streaming chat completion. ``body`` is the caller's request (not mutated); the adapter
        sends it with ``model`` in place of the caller's model and returns a ``chat.completion`` dict
        (a ``Relayed`` one when it sent ``native``, the request in its own format, instead)."""

    @abc.abstractmethod
    async def chat_stream(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> ChatStream:
        """Start a streaming completion; return only once the first chunk has arrived, so the caller
        can still fall back. Raises ``UpstreamError`` for anything that fails before that. With
        ``native`` in the adapter's format, every upstream event comes as a ``RelayedChunk``."""

    @abc.abstractmethod
    async def embed(self, endpoint: Endpoint, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """An embeddings request in OpenAI's shape; returns OpenAI's ``list`` of embeddings."""

    def refusal(self, operation: str, body: Mapping[str, Any]) -> CannotServe | None:
        """Why this adapter cannot carry the request (``operation``: chat | embeddings), or None.

        A cheap look at the body, no translation: the router asks before a candidate's guards, so it
        never queues for a slot it will not use. ``chat``/``embed`` raise the same ``CannotServe``."""
        return None

    async def count(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None, timeout_s: float
    ) -> int | None:
        """The prompt's tokens by the server's own tokenizer (``count_tokens``, never a chat request's
        path), None where it has none or did not answer; raises nothing."""
        return None

    def serve(self, surfaces: frozenset[str]) -> None:
        """At every plan load (``adapter_for``, ``KindAdapters.want``): what the plan's API surfaces
        (``server.surfaces``) need of this adapter beyond its core (a same-format relay, the server's
        tokenizer), imported now, never on a request. Nothing by default."""
        return None

    @abc.abstractmethod
    async def probe(self, endpoint: Endpoint, timeout_s: float) -> None:
        """A cheap liveness check (Ollama ``GET /api/tags``, OpenAI ``GET /models``); raises
        ``UpstreamError`` when the endpoint is not healthy."""


T = TypeVar("T")
Call = Callable[[Adapter, Endpoint, str, Mapping[str, Any], Native | None], Awaitable[T]]

UPSTREAM_HEADERS: ContextVar[Mapping[str, str] | None] = ContextVar(
    "interlock_upstream_headers", default=None
)
"""Headers for the upstream request being sent in this task (``traceparent``), set only while a
traced attempt is calling its upstream."""


def adapter_for(kind: str, transport: Transport, surfaces: Iterable[str] = SURFACES) -> Adapter:
    """The adapter for a provider kind (a row of ``interlock.kinds.KINDS``), sending through ``transport``,
    ready for a plan serving ``surfaces`` (all four unless named: ``Adapter.serve``)."""
    row = KINDS.get(kind)
    if row is None:
        raise ValueError(f"unknown upstream kind {kind!r}; expected {listed()}")
    adapter: Adapter = row.load_adapter()(transport)
    adapter.serve(frozenset(surfaces))
    return adapter


class KindAdapters(dict[str, Adapter]):
    """The adapters by provider kind over one transport, each made (its module imported) when a plan
    first names its kind (``want``: at start and at a reload's plan load, before the plan is swapped
    in), never on a request: a plan of ``openai`` providers only never imports the Ollama adapter."""

    __slots__ = ("transport",)

    def __init__(self, transport: Transport) -> None:
        super().__init__()
        self.transport = transport

    def want(self, kinds: Iterable[str], surfaces: Iterable[str] = SURFACES) -> None:
        """An adapter for each of ``kinds`` that has none yet, and every adapter ready for ``surfaces``
        (a plan's ``server.surfaces``: ``Adapter.serve``)."""
        served = frozenset(surfaces)
        for kind in kinds:
            if kind not in self:
                self[kind] = adapter_for(kind, self.transport, served)
        for adapter in self.values():
            adapter.serve(served)
