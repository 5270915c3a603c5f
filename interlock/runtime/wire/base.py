"""The provider border's core types: what every wire format module, adapter and surface shares.

Requests and responses cross this border in OpenAI's shape (plain dicts): a chat request body, a
``chat.completion`` dict, ``chat.completion.chunk`` dicts, an embeddings list. Endpoints are built once,
at plan load.

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
from typing import Any

from interlock.runtime.base.asgi import Header
from interlock.runtime.base.mypyc_marks import mypyc_attr
from interlock.schema.plan import DEFAULT_MAX_STREAM_LINE_BYTES, DEFAULT_MAX_UPSTREAM_BODY_BYTES


@dataclass(slots=True)
class Native:
    """The caller's request in its own wire format, for an upstream that speaks it (a same-format relay);
    read-only once made (not frozen: one is built per request, and a frozen one costs more to build).

    ``format`` is a provider kind (``anthropic``, ``ollama``); ``headers`` are the provider-defined
    ones the request came with (``anthropic-beta``, ``anthropic-version``), forwarded as they are."""

    format: str
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


def relayed_body(native: Mapping[str, Any], model: str, *, stream: bool) -> dict[str, Any]:
    """A caller's own request for an upstream of its format: as it came, ``model`` replaced and
    ``stream`` set (hosted tools, unknown fields: all as sent)."""
    request = dict(native)
    request["model"] = model
    if stream:
        request["stream"] = True
    else:
        request.pop("stream", None)
    return request


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


def header_lines(headers: Mapping[str, str]) -> bytes | None:
    """``headers`` as HTTP/1.1 header lines (``Name: value\\r\\n`` each), or None when one holds a line
    break or a character Latin-1 cannot carry (such a header is never sent)."""
    lines = []
    for name, value in headers.items():
        if "\n" in value or "\r" in value or "\n" in name or "\r" in name:
            return None
        lines.append(f"{name}: {value}\r\n")
    try:
        return "".join(lines).encode("latin-1")
    except UnicodeEncodeError:
        return None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One place to send requests: an OpenAI-compatible base URL, or one Ollama worker.

    ``lines`` is ``headers`` encoded once, when the endpoint is built (``header_lines``)."""

    provider: str
    kind: str  # "openai" | "ollama"
    url: str  # openai: the provider's base_url (e.g. https://api.groq.com/openai/v1); ollama: worker URL
    label: str  # "groq", or "ollama@rtx4090" for a worker: used in health reports and logs
    # precomputed, Authorization included; never logged or reported (and left out of repr())
    headers: Mapping[str, str] = field(repr=False)
    connect_s: float
    first_byte_s: float
    total_s: float
    # a stream's longest silence after its first content (``timeouts.idle``); 0: none (the total only)
    idle_s: float = 0.0
    # the plan's server.max_upstream_body_bytes / max_stream_line_bytes: past them, ProtocolFailure
    max_body_bytes: int = DEFAULT_MAX_UPSTREAM_BODY_BYTES
    max_line_bytes: int = DEFAULT_MAX_STREAM_LINE_BYTES
    lines: bytes | None = field(init=False, repr=False, compare=False)
    # asked when the first-byte deadline passes, with the seconds waited: seconds more to wait, because
    # the server reports progress on its work (``fleet/signals/progress.py``), or None; only on a
    # watched copy (the router's)
    patience: Callable[[float], float | None] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lines", header_lines(self.headers))


@mypyc_attr(allow_interpreted_subclasses=True)  # test doubles subclass it (runtime/base/mypyc_marks.py)
class ChatStream(abc.ABC):
    """An upstream stream whose first chunk has already arrived.

    Iterating yields OpenAI ``chat.completion.chunk`` dicts, the first one included, and ends after the
    upstream's last chunk (no ``[DONE]`` sentinel). ``read`` gives the same chunks, those that arrived
    together at once (the relay writes them in one piece), and ``relay`` hands them to a callback; use
    one of them on a stream. A failure
    mid-stream raises an ``UpstreamError`` (after the chunks that arrived before it). ``aclose`` releases
    the connection; it is safe to call at any time and more than once.
    """

    __slots__ = ()  # so that a subclass's own __slots__ hold (no per-instance __dict__)

    @abc.abstractmethod
    def __aiter__(self) -> AsyncIterator[dict[str, Any]]: ...

    @abc.abstractmethod
    async def read(self) -> Sequence[dict[str, Any]]:
        """The next chunks, as many as have arrived (at least one); empty once the stream is over."""

    async def relay(
        self, sink: Callable[[Sequence[dict[str, Any]]], bool], drain: Callable[[], Awaitable[None]]
    ) -> None:
        """Hand the chunks to ``sink`` (those that arrived together at once) until the stream is over,
        awaiting ``drain()`` whenever ``sink`` returns True (its caller is full); failures as ``read``'s.
        A stream that reads its upstream in a callback hands them over there (no task switch each).
        The sequence is the sink's for the call only (a stream may reuse it for the next read)."""
        while chunks := await self.read():
            if sink(chunks):
                await drain()

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


class StreamRender(abc.ABC):
    """One stream's events in a caller's wire format, from OpenAI chunks; built per stream (it may keep
    state). Each wire module holds its format's; a surface picks one per request."""

    headers: tuple[Header, ...]
    # the prompt's tokens when the stream starts (the upstream's own count, else interlock's estimate),
    # set by the lifecycle before the first chunk: for a format whose first event states it
    prompt_tokens: int = 0

    @abc.abstractmethod
    def chunk(self, chunk: dict[str, Any]) -> bytes:
        """The bytes for one OpenAI ``chat.completion.chunk`` (may be empty)."""

    @abc.abstractmethod
    def end(self) -> bytes:
        """The terminal success event(s)."""

    def keepalive(self) -> bytes:
        """What the caller's client reads past while the first content is awaited (a silent prefill, a
        fallback walk): an SSE comment, which every SSE reader skips; a format of its own overrides it."""
        return b": keepalive\n\n"

    @abc.abstractmethod
    def error(self, message: str) -> bytes:
        """The event that ends a stream broken after it started: no success terminator follows."""
