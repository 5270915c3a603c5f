"""The provider border: what the router asks of an upstream, whatever its wire format.

Requests and responses cross this border in OpenAI's shape (plain dicts): a chat request body, a
``chat.completion`` dict, ``chat.completion.chunk`` dicts, an embeddings list. Each adapter translates
to its own wire format and maps every exception of the HTTP client to ``interlock.runtime.errors``;
nothing of the client library leaks past this package. Endpoints are built once, at plan load.

Same-format relay: a request may also come with its ``Native`` form (the caller's body in its own wire
format and the provider headers it came with). An adapter of that format sends it as it came (the
model replaced, the gateway's own fields set) and answers with a ``Relayed`` completion or
``RelayedChunk`` chunks: still OpenAI-shaped for metering, each holding the upstream's own answer or
event, which the caller's surface writes back unchanged but for the model name.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from interlock.runtime.errors import CannotServe
from interlock.schema.plan import DEFAULT_MAX_STREAM_LINE_BYTES, DEFAULT_MAX_UPSTREAM_BODY_BYTES


@dataclass(frozen=True, slots=True)
class Native:
    """The caller's request in its own wire format, for an upstream that speaks it (a same-format relay).

    ``format`` is a provider kind (``anthropic``, ``ollama``); ``headers`` are the provider-defined
    ones the request came with (``anthropic-beta``, ``anthropic-version``), forwarded as they are."""

    format: str
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


class Relayed(dict[str, Any]):
    """A ``chat.completion`` dict (for metering and for surfaces of other formats) that also holds the
    upstream's own answer, ``native``, for a surface of the upstream's format."""

    __slots__ = ("native",)

    def __init__(self, completion: Mapping[str, Any], native: dict[str, Any]) -> None:
        super().__init__(completion)
        self.native = native


class RelayedChunk(dict[str, Any]):
    """A ``chat.completion.chunk`` dict (empty of choices for an event with no OpenAI counterpart) that
    also holds the upstream's own event: ``native`` (its parsed data) and ``raw`` (its bytes)."""

    __slots__ = ("native", "raw")

    def __init__(self, chunk: Mapping[str, Any], native: dict[str, Any], raw: bytes) -> None:
        super().__init__(chunk)
        self.native = native
        self.raw = raw


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One place to send requests: an OpenAI-compatible base URL, or one Ollama worker."""

    provider: str
    kind: str  # "openai" | "ollama"
    url: str  # openai: the provider's base_url (e.g. https://api.groq.com/openai/v1); ollama: worker URL
    label: str  # "groq", or "ollama@rtx4090" for a worker: used in health reports and logs
    # precomputed, Authorization included; never logged or reported (and left out of repr())
    headers: Mapping[str, str] = field(repr=False)
    connect_s: float
    first_byte_s: float
    total_s: float
    # the plan's server.max_upstream_body_bytes / max_stream_line_bytes: past them, ProtocolFailure
    max_body_bytes: int = DEFAULT_MAX_UPSTREAM_BODY_BYTES
    max_line_bytes: int = DEFAULT_MAX_STREAM_LINE_BYTES


class ChatStream(abc.ABC):
    """An upstream stream whose first chunk has already arrived.

    Iterating yields OpenAI ``chat.completion.chunk`` dicts, the first one included, and ends after the
    upstream's last chunk (no ``[DONE]`` sentinel). ``read`` gives the same chunks, those that arrived
    together at once (the relay writes them in one piece); use one or the other on a stream. A failure
    mid-stream raises an ``UpstreamError`` (after the chunks that arrived before it). ``aclose`` releases
    the connection; it is safe to call at any time and more than once.
    """

    __slots__ = ()  # so that a subclass's own __slots__ hold (no per-instance __dict__)

    @abc.abstractmethod
    def __aiter__(self) -> AsyncIterator[dict[str, Any]]: ...

    @abc.abstractmethod
    async def read(self) -> Sequence[dict[str, Any]]:
        """The next chunks, as many as have arrived (at least one); empty once the stream is over."""

    @abc.abstractmethod
    async def aclose(self) -> None: ...

    @property
    def prompt_tokens(self) -> int | None:
        """The prompt's tokens as the upstream counted them before its first chunk (Anthropic's
        ``message_start``), or None when it said nothing yet."""
        return None


def with_headers(endpoint: Endpoint, native: Native) -> Endpoint:
    """``endpoint`` sending the provider headers a relayed request came with too (over its own)."""
    if not native.headers:
        return endpoint
    return dataclasses.replace(endpoint, headers={**endpoint.headers, **native.headers})


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

    @abc.abstractmethod
    async def probe(self, endpoint: Endpoint, timeout_s: float) -> None:
        """A cheap liveness check (Ollama ``GET /api/tags``, OpenAI ``GET /models``); raises
        ``UpstreamError`` when the endpoint is not healthy."""


T = TypeVar("T")
Call = Callable[[Adapter, Endpoint, str, Mapping[str, Any], Native | None], Awaitable[T]]
