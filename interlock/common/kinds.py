"""Provider kinds: one row each, read by the schema, the compiler, the plan loader, explain, diff and
the adapter registry. A new kind is one adapter module plus one row here.

Why one table: a kind decides where requests go (one ``base_url``, or the provider's Ollama
``workers``), how the credential is sent (``Authorization: Bearer`` or ``x-api-key``), which fixed
headers go with every request, and which adapter speaks its wire format. Scattered ``if kind ==
"openai"`` switches quietly treated every other kind as the last branch; this module imports nothing
of the runtime (the adapter is named by its import path and loaded when the gateway starts).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

DEFAULT_IDLE_MS = 120_000  # a kind that names no idle timeout of its own

KindName = Literal["anthropic", "ollama", "openai"]  # the plan schema's enum: a test ties it to KINDS


def _bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


def _x_api_key(credential: str) -> dict[str, str]:
    return {"x-api-key": credential}


@dataclass(frozen=True, slots=True)
class ProviderKind:
    """What differs between provider kinds; everything else is shared."""

    name: str
    shape: Literal["base_url", "workers"]  # one base URL, or one endpoint per Ollama worker
    what: str  # for messages: "Ollama workers", "any OpenAI-compatible API"
    example_url: str  # for hints: what a base_url (or a worker url) looks like
    auth: Callable[[str], dict[str, str]]  # credential -> the headers that carry it
    adapter: str  # "module:Class", an ``upstream.base.Adapter`` taking the shared UpstreamClient
    fixed_headers: Mapping[str, str] = field(default_factory=dict)  # sent with every request
    key_expected: bool = True  # warn (IL108) when no `api_key_env` is given
    live_facts: bool = False  # its workers report models, contexts and capabilities (Ollama's /api/show)
    # a `base_url` kind whose provider may list `workers` instead (several servers of its own, each
    # with slots and a queue: llama.cpp, vLLM, SGLang, LM Studio boxes)
    workers_allowed: bool = False
    # the wire formats besides its own that a provider of this kind may declare it speaks (``responses:
    # true``: the OpenAI Responses API beside Chat Completions), for a caller of that format's relay
    also_speaks: frozenset[str] = frozenset()
    # its servers answer an error when a prompt is over their context (llama-server, vLLM, SGLang, the
    # clouds): the context estimate only orders its candidates; False: it truncates silently (Ollama),
    # and the estimate is what refuses
    says_overflow: bool = True
    # whether a POST upstream carries an ``Idempotency-Key`` (the IETF httpapi draft's header; the same
    # value on the client's resend): for kinds that reach APIs billed per request, where a vendor or a
    # gateway in between may deduplicate by it; a server that does not know the header ignores it
    idempotency_key: bool = False
    # `timeouts.first_byte` (ms) of a provider of this kind reached at one `base_url` (a hosted API),
    # when neither it nor `timeouts:` says; a provider with `workers` gets 60 s (the compiler's
    # ``context.WORKERS_FIRST_BYTE_MS``)
    first_byte_ms: int = 60_000
    # the longest silence allowed inside a stream once it has said something (``timeouts.idle`` unless
    # the config sets one): past it the stream is a stalled one, ended with the caller's error event and
    # counted against the circuit. Local kinds keep room for a server's own pauses (a slot swap, a
    # prefill of another slot, a tool call held back): figures in docs/configuration.md
    idle_ms: int = DEFAULT_IDLE_MS
    # its servers continue a final assistant message instead of answering after it (an assistant
    # prefill): where `resume: same_model` may send a cut stream's answer so far (runtime/request/resume.py).
    # llama-server does by default (`--no-prefill-assistant` turns it off), Ollama and Anthropic do;
    # OpenAI's own API does not (it answers anew): an alias resumes only onto replicas that continue
    assistant_prefill: bool = True

    def load_adapter(self) -> Any:
        """The adapter class (imported here, at gateway start, never at plan load)."""
        module, _, name = self.adapter.partition(":")
        return getattr(importlib.import_module(module), name)


CLOUD_FIRST_BYTE_MS = 12_000
"""A hosted API's time to its first token before the walk moves on: a fallback that answers in a second
or two then answers within 15 s of the request, well before a user gives up, where a 60 s limit made a
cloud whose first token came 20 s late answer at 21 s and a silent one cost 61 s (issue 40). A long
prompt's prefill comes on top once the endpoint's prompt speed is learned (``runtime.learned``)."""
KINDS: Mapping[str, ProviderKind] = {
    "anthropic": ProviderKind(
        name="anthropic",
        shape="base_url",
        what="the Anthropic Messages API",
        example_url="https://api.anthropic.com",
        auth=_x_api_key,
        adapter="interlock.runtime.upstream.anthropic:AnthropicAdapter",
        fixed_headers={"anthropic-version": "2023-06-01"},
        idempotency_key=True,  # a cloud API billed per request
        first_byte_ms=CLOUD_FIRST_BYTE_MS,
    ),
    "ollama": ProviderKind(
        name="ollama",
        shape="workers",
        what="Ollama workers",
        example_url="http://10.0.0.5:11434",
        auth=_bearer,
        adapter="interlock.runtime.upstream.ollama:OllamaAdapter",
        key_expected=False,
        live_facts=True,
        says_overflow=False,
        # not sent: the operator's own box, which bills nothing and deduplicates nothing (its Go server
        # ignores the header), so it would be bytes for nobody on every request
    ),
    "openai": ProviderKind(
        name="openai",
        shape="base_url",
        what="any OpenAI-compatible API",
        example_url="https://api.groq.com/openai/v1",
        auth=_bearer,
        adapter="interlock.runtime.upstream.openai:OpenAIAdapter",
        workers_allowed=True,
        also_speaks=frozenset({"responses"}),
        idempotency_key=True,  # OpenAI, the hosted APIs and gateways copying it (local servers ignore it)
        first_byte_ms=CLOUD_FIRST_BYTE_MS,  # a local server is listed under `workers`: 60 s
    ),
}
PROVIDER_KINDS: tuple[str, ...] = tuple(KINDS)

# The servers an `openai` worker may say it is (`server:`), so the gateway reads its load: one module
# each in `runtime.fleet.signals` (a test ties this tuple to that table; the compiler reads only this).
SERVER_KINDS: tuple[str, ...] = ("llama.cpp", "sglang", "vllm")


def has_workers(kind: str, workers: object) -> bool:
    """Whether a provider of ``kind`` sends to workers: always for Ollama, for OpenAI-compatible
    servers when it lists them (instead of a ``base_url``)."""
    row = KINDS.get(kind)
    return row is not None and (row.shape == "workers" or (row.workers_allowed and bool(workers)))


def listed(names: tuple[str, ...] = PROVIDER_KINDS) -> str:
    """``anthropic``, ``ollama`` or ``openai``: for messages."""
    quoted = [f"`{name}`" for name in names]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]
