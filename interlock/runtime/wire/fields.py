"""What each adapter does with each request field: one row each, as docs/upstream-adapters.md shows.

The rows cover every field of the ``openai`` SDK's Chat Completions and Embeddings request types, plus the
Ollama-native fields clients send at the top level (LiteLLM and others). A completeness test reads the
SDK's types and fails when a field has no row here or in the docs; another test sends each row's field
through both adapters to the fakes and checks the handling named here.

Handling (how a field reaches an upstream of that kind):
- ``passed``: sent unchanged;
- ``translated``: sent as the upstream's counterpart (``max_tokens`` -> ``options.num_predict``);
- ``emulated``: the gateway does it itself (``tool_choice`` naming one function -> only that tool is sent);
- ``refused``: when the value asks for something the upstream cannot do (``n: 2``), the candidate cannot
  serve the request (``CannotServe``, nothing is sent) and the walk goes on to the next one;
- ``dropped``: not sent; it does not change the answer (tags, cache and billing hints) or has no meaning
  for that upstream;
- ``guard``: settled per chosen worker by the preflight before translation (the plan's context sizes,
  the model's capabilities: ``guards/ollama_options.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Handling(StrEnum):
    PASSED = "passed"
    TRANSLATED = "translated"
    EMULATED = "emulated"
    REFUSED = "refused"
    DROPPED = "dropped"
    GUARD = "guard"


P, T, E, R, D, G = Handling  # in the order defined


@dataclass(frozen=True, slots=True)
class Field:
    """One request field: its handling towards an OpenAI-compatible upstream and towards Ollama."""

    name: str
    openai: Handling
    ollama: Handling
    note: str


# Ollama's runner options that clients send at the top level; all go into ``options`` for Ollama.
OLLAMA_OPTION_FIELDS = (
    "num_ctx",
    "num_keep",
    "num_predict",
    "top_k",
    "min_p",
    "typical_p",
    "repeat_last_n",
    "repeat_penalty",
    "penalize_newline",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
    "tfs_z",
    "num_batch",
    "num_gpu",
    "main_gpu",
    "num_thread",
    "use_mmap",
    "numa",
)

# keys of an Ollama ``options`` object that an OpenAI-compatible upstream gets at the top level
OPENAI_OPTIONS = (
    "temperature",
    "top_p",
    "seed",
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "num_predict",
)

CHAT_FIELDS: tuple[Field, ...] = (
    Field("audio", P, R, "Ollama has no audio output"),
    Field("frequency_penalty", P, T, "`options.frequency_penalty`"),
    Field("function_call", P, R, "the deprecated functions API; send `tools`/`tool_choice`"),
    Field("functions", P, R, "the deprecated functions API; send `tools`"),
    Field("logit_bias", P, R, "a non-empty map; Ollama has no token bias"),
    Field("logprobs", P, R, "`true`; Ollama's native chat answer carries no log probabilities"),
    Field("max_completion_tokens", P, T, "`options.num_predict`"),
    Field("max_tokens", P, T, "`options.num_predict` (`max_completion_tokens` wins)"),
    Field("messages", P, T, "roles, text parts, `data:` images, tool calls; remote image URLs refused"),
    Field("metadata", P, D, "tags for stored completions"),
    Field("modalities", P, R, 'when it asks for `audio`; `["text"]` passes'),
    Field("model", T, T, "replaced by the candidate's model"),
    Field("moderation", P, R, "Ollama runs no moderation"),
    Field("n", P, R, "above 1: Ollama answers one choice per request"),
    Field("parallel_tool_calls", P, E, "`false`: only the answer's first tool call is kept"),
    Field("prediction", P, D, "a latency hint; the answer is the same without it"),
    Field("presence_penalty", P, T, "`options.presence_penalty`"),
    Field("prompt_cache_key", P, D, "a cache routing hint"),
    Field("prompt_cache_options", P, D, "a cache hint"),
    Field("prompt_cache_retention", P, D, "a cache hint"),
    Field("reasoning_effort", P, G, "-> `think`, for models known to think (else dropped, said in a header)"),
    Field("response_format", P, T, '`json_object` -> `format: "json"`, `json_schema` -> `format: <schema>`'),
    Field("safety_identifier", P, D, "an abuse-tracking id"),
    Field("seed", P, T, "`options.seed`"),
    Field("service_tier", P, D, "a billing and latency tier"),
    Field("stop", P, T, "`options.stop` (always a list)"),
    Field("store", P, D, "asks OpenAI to store the completion; Ollama stores nothing"),
    Field("stream", T, T, "`true` for a stream, removed otherwise (Ollama: `false`)"),
    Field("stream_options", T, E, "`include_usage` -> a usage chunk (removed when not streaming)"),
    Field("temperature", P, T, "`options.temperature`"),
    Field("tool_choice", P, E, "`none` -> no tools, a named function -> only it; `required` refused"),
    Field("tools", P, T, "function tools pass; custom (non-function) tools refused"),
    Field("top_logprobs", P, R, "when set; see `logprobs`"),
    Field("top_p", P, T, "`options.top_p`"),
    Field("user", P, D, "an end-user id"),
    Field("verbosity", P, R, "`low`/`high`; `medium` (the default) passes"),
    Field("web_search_options", P, R, "Ollama cannot search the web"),
)

# Ollama-native fields, at the top level of an OpenAI-shaped request.
NATIVE_FIELDS: tuple[Field, ...] = (
    Field("options", T, P, "OpenAI: sampling keys and num_predict lifted, the rest dropped"),
    Field("keep_alive", D, P, "how long Ollama keeps the model loaded"),
    Field("think", D, G, "passed to models known to think (else dropped, said in a header)"),
    Field("format", T, P, 'OpenAI: `"json"` -> `response_format` json_object, a schema -> json_schema'),
    Field("num_ctx", D, G, "-> `options.num_ctx`, checked against the plan's limits"),
    Field("num_predict", T, T, "OpenAI: `max_tokens`; Ollama: `options.num_predict`"),
    *(
        Field(name, D, T, f"`options.{name}`")
        for name in OLLAMA_OPTION_FIELDS
        if name not in ("num_ctx", "num_predict")
    ),
)

EMBEDDING_FIELDS: tuple[Field, ...] = (
    Field("dimensions", P, P, "Ollama's `/api/embed` takes it too"),
    Field("encoding_format", P, E, "`base64`: float32s packed by the gateway"),
    Field("input", P, T, "a string or strings; token arrays refused"),
    Field("model", T, T, "replaced by the candidate's model"),
    Field("user", P, D, "an end-user id"),
)

# For the OpenAI-compatible adapter: fields that never go to it as they are (a strict provider answers 400).
OPENAI_STRIPPED = frozenset(
    f.name for f in NATIVE_FIELDS if f.openai in (Handling.DROPPED, Handling.TRANSLATED)
)


@dataclass(frozen=True, slots=True)
class Drops:
    """Which top-level fields of a request one kind of upstream never gets, for ``X-Interlock-Dropped``.

    ``carried`` set: every other field is dropped (the Ollama adapter builds its request anew, so a
    field it does not know is not sent); else the fields in ``dropped`` are (the OpenAI-compatible
    adapter passes what it does not know).
    """

    carried: frozenset[str] | None = None
    dropped: frozenset[str] = frozenset()
    options_kept: frozenset[str] | None = None  # set: other keys of ``options`` are dropped too
    turn_dropped: frozenset[str] = frozenset()  # keys of an assistant turn never sent (``messages.KEY``)

    def of(self, body: Mapping[str, Any]) -> list[str]:
        if self.carried is not None:
            out = [key for key, value in body.items() if key not in self.carried and value is not None]
        elif self.dropped.isdisjoint(body):  # the common case: one pass in C, no list built
            out = []
        else:
            out = [key for key, value in body.items() if key in self.dropped and value is not None]
        if self.options_kept is not None and isinstance(options := body.get("options"), Mapping):
            out.extend(f"options.{key}" for key in options if key not in self.options_kept)
        if self.turn_dropped:
            out.extend(self._turns(body.get("messages")))
        return out

    def _turns(self, messages: Any) -> list[str]:
        """``messages.KEY`` for each of ``turn_dropped`` an assistant turn carries (once each)."""
        if not isinstance(messages, list):
            return []
        found = {
            key
            for message in messages
            if isinstance(message, Mapping) and message.get("role") == "assistant"
            for key in self.turn_dropped
            if message.get(key)
        }
        return [f"messages.{key}" for key in sorted(found)]


def _carried(rows: tuple[Field, ...]) -> frozenset[str]:
    return frozenset(row.name for row in rows if row.ollama is not Handling.DROPPED)


ANTHROPIC_CHAT = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "temperature",
        "top_p",
        "top_k",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stream",
        "stream_options",
        "options",  # only its num_predict, stop, temperature, top_p, top_k
        "n",  # 1 only (else refused)
        "think",  # -> thinking (enabled with a budget, or disabled)
        "reasoning_effort",  # -> thinking's budget
    }
)

# keys of an Ollama ``options`` object the Anthropic adapter reads (``wire.anthropic.messages_request``)
ANTHROPIC_OPTIONS = frozenset({"num_predict", "stop", "temperature", "top_p", "top_k"})

# (upstream kind, endpoint) -> its Drops; built once
DROPS: dict[tuple[str, str], Drops] = {
    ("openai", "chat"): Drops(
        dropped=frozenset(f.name for f in NATIVE_FIELDS if f.openai is Handling.DROPPED),
        options_kept=frozenset(OPENAI_OPTIONS),
    ),
    ("openai", "embeddings"): Drops(dropped=OPENAI_STRIPPED),
    ("ollama", "chat"): Drops(carried=_carried(CHAT_FIELDS + NATIVE_FIELDS)),
    ("ollama", "embeddings"): Drops(carried=_carried(EMBEDDING_FIELDS)),
    # the Anthropic adapter builds its request anew (``wire.anthropic``): these are what it reads
    # an earlier turn's reasoning: Anthropic takes back only thinking it signed (``wire.anthropic``)
    ("anthropic", "chat"): Drops(
        carried=ANTHROPIC_CHAT,
        options_kept=ANTHROPIC_OPTIONS,
        turn_dropped=frozenset({"reasoning_content", "reasoning"}),
    ),
    ("anthropic", "embeddings"): Drops(carried=frozenset()),  # refused before any call
}

# a relayed request's format -> what its relay still leaves out (None: nothing; it goes as it came). The
# OpenAI chat relay is the internal form itself: the Ollama-native fields still never reach the upstream.
RELAY_DROPS: dict[str, Drops | None] = {
    "openai": DROPS["openai", "chat"],
    "anthropic": None,
    "ollama": None,
    "responses": None,
}


Limit = tuple[str, ...]
"""A field that sets a request's output ceiling: ``("max_tokens",)``, ``("options", "num_predict")``."""

OUTPUT_LIMITS: dict[str, tuple[Limit, ...]] = {
    # the internal form's too; a top-level ``num_predict`` as LiteLLM sends it
    "openai": (("max_tokens",), ("max_completion_tokens",), ("num_predict",), ("options", "num_predict")),
    "anthropic": (("max_tokens",),),
    "ollama": (("options", "num_predict"),),
    "responses": (("max_output_tokens",),),
}
"""Each wire format's output ceilings (a surface checks them, ``limited`` writes them); the first is the
one set where a request sets none."""

ANY_LIMIT: tuple[Limit, ...] = tuple(dict.fromkeys(f for limits in OUTPUT_LIMITS.values() for f in limits))
"""Every format's output ceilings: what a body of any format may hold."""


def limited(
    body: Mapping[str, Any], fields: Sequence[Limit], ceiling: int, *, clamp: bool = False
) -> dict[str, Any] | None:
    """The one writer of output ceilings: ``body`` with each of ``fields`` it sets above ``ceiling`` set
    to it, as a copy (``body`` stays as it is); None when there is nothing to write.

    Above: an integer over ``ceiling`` (what fits a window: ``guards.ceiling``). With ``clamp`` (only
    ``ceiling`` is paid for: the credits' and rates' cut), also any value that is not a count from 1 up
    (Ollama's -1 and -2, "no limit"), and where ``body`` sets none of ``fields``, the first is set.
    """
    out: dict[str, Any] | None = None
    found = False
    for path in fields:
        if len(path) == 1:  # most are top-level: one lookup
            value = body.get(path[0])
        else:
            holder = body.get(path[0])
            for key in path[1:-1]:
                holder = holder.get(key) if isinstance(holder, dict) else None
            value = holder.get(path[-1]) if isinstance(holder, dict) else None
        if value is None:
            continue
        found = True
        if type(value) is int:
            if value <= ceiling and (value > 0 or not clamp):
                continue
        elif not clamp:
            continue
        out = dict(body) if out is None else out
        if len(path) == 1:
            out[path[0]] = ceiling
        else:
            _put(out, path, ceiling)
    if clamp and not found and fields:
        out = dict(body)  # nothing was found, so nothing was written yet
        _put(out, fields[0], ceiling)
    return out


def _put(body: dict[str, Any], path: Limit, value: int) -> None:
    """``path`` of ``body`` set to ``value``, each object on the way copied (or made)."""
    holder = body
    for key in path[:-1]:
        inner = holder.get(key)
        holder[key] = inner = dict(inner) if isinstance(inner, dict) else {}
        holder = inner
    holder[path[-1]] = value
