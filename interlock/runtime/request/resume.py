"""`resume: same_model`: a stream cut mid-answer goes on from a replica of the same model, the answer so
far sent as an assistant prefill, so the caller reads one uninterrupted answer.

Opt-in per alias (its `resume`); the rules, each for a reason:
- only to a candidate of the same model name (another provider or server serving those weights): two
  models write in two tones, and a continuation across them reads as one answer that is not;
- only to a kind that continues a final assistant message (``ProviderKind.assistant_prefill``:
  llama-server does by default, Ollama and Anthropic do);
- only text: a stream that had begun a tool call or reasoning is not resumed (a half-written call's
  arguments cannot be continued by prefill);
- only a caller's stream the gateway renders from chunks, not a same-format relay of a format other
  than Chat Completions (a Messages or Responses relay's events carry state a new stream would repeat);
- once: a resumed stream that breaks too ends with the error event; a replica that refuses the
  prefill (a 4xx) or fails before content leaves the first failure's clean error event.

``Said`` gathers the text as it is relayed (only when the alias resumes: no cost otherwise).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from interlock.common.kinds import KINDS
from interlock.runtime.base.errors import TransientError
from interlock.runtime.loaded.tables import Alias, Candidate, Target
from interlock.runtime.wire.base import ChatStream

if TYPE_CHECKING:
    from interlock.runtime.surfaces.base import Parsed


class Said:
    """The text of a stream so far, and whether it can be continued by a prefill."""

    __slots__ = ("parts", "resumable")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.resumable = True

    def add(self, chunks: Sequence[Mapping[str, Any]]) -> None:
        for chunk in chunks:
            choices = chunk.get("choices")
            if not choices or type(choices) is not list or type(choices[0]) is not dict:
                continue
            delta = choices[0].get("delta")
            if type(delta) is not dict:
                continue
            if delta.get("tool_calls") or delta.get("reasoning") or delta.get("reasoning_content"):
                self.resumable = False
            if choices[0].get("finish_reason"):
                self.resumable = False  # it ended: what broke is after the answer, nothing to continue
            content = delta.get("content")
            if type(content) is str and content:
                self.parts.append(content)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def gatherer(target: Target, parsed: Parsed, candidate: Candidate) -> Said | None:
    """A gatherer of the answer's text when the alias resumes a cut stream and this stream is one the
    gateway renders from chunks (or the Chat Completions relay); else None (no cost)."""
    if not isinstance(target, Alias) or not target.resume:
        return None
    native = parsed.relayed(candidate.relays)
    return Said() if native is None or native.format == "openai" else None


def replicas(target: Target, candidate: Candidate) -> Target | None:
    """The candidates of ``target`` that serve ``candidate``'s model elsewhere and continue a prefill,
    in chain order, as a target of their own; None when there is none."""
    found = [
        (index, c)
        for index, c in enumerate(target.candidates)
        if c.model == candidate.model and c.id != candidate.id and _prefills(c.kind)
    ]
    if not found:
        return None
    return Target(
        label=target.label,
        metric_label=target.metric_label,
        candidates=tuple(c for _, c in found),
        header=target.header,
        spill=tuple(target.spill[i] for i, _ in found),
        retry=tuple(target.retry[i] for i, _ in found) if target.retry else (),
    )


def _prefills(kind: str) -> bool:
    row = KINDS.get(kind)
    return row is not None and row.assistant_prefill


def resumable(error: BaseException, said: Said) -> bool:
    """Whether a stream broken by ``error`` after ``said`` may be resumed: an upstream's transient
    failure (cut, stalled, 5xx event), text so far and nothing else."""
    return isinstance(error, TransientError) and said.resumable and bool(said.parts)


def continued(body: Mapping[str, Any], said: Said) -> dict[str, Any]:
    """The request again, with the answer so far as the last, assistant, message (the prefill), and its
    output ceiling less what was said (counted as the chunks that said it: a token each from the
    local servers that continue a prefill), so the whole answer stays within the caller's ceiling."""
    messages = list(body.get("messages") or [])
    messages.append({"role": "assistant", "content": said.text})
    again = {**body, "messages": messages}
    for key in ("max_tokens", "max_completion_tokens"):
        ceiling = body.get(key)
        if type(ceiling) is int:
            again[key] = max(1, ceiling - len(said.parts))
    return again


def _says(chunk: Mapping[str, Any]) -> bool:
    """Whether a continuation's chunk adds to the answer (text, a finish, usage): its role-only
    preamble does not, and would read as a second start of the message."""
    if chunk.get("usage"):
        return True
    choices = chunk.get("choices")
    if not choices or type(choices) is not list or type(choices[0]) is not dict:
        return False
    delta = choices[0].get("delta")
    return bool(choices[0].get("finish_reason")) or (type(delta) is dict and bool(delta.get("content")))


class ContinuedStream(ChatStream):
    """A replica's stream continuing a cut one: its chunks less the preamble (a role-only delta)."""

    __slots__ = ("_stream",)

    def __init__(self, stream: ChatStream) -> None:
        self._stream = stream

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[dict[str, Any]]:
        async for chunk in self._stream:
            if _says(chunk):
                yield chunk

    async def read(self) -> Sequence[dict[str, Any]]:
        while chunks := await self._stream.read():
            kept = [chunk for chunk in chunks if _says(chunk)]
            if kept:
                return kept
        return ()

    async def relay(
        self, sink: Callable[[Sequence[dict[str, Any]]], bool], drain: Callable[[], Awaitable[None]]
    ) -> None:
        def kept(chunks: Sequence[dict[str, Any]]) -> bool:
            said = [chunk for chunk in chunks if _says(chunk)]
            return bool(said) and sink(said)

        await self._stream.relay(kept, drain)

    async def aclose(self) -> None:
        await self._stream.aclose()
