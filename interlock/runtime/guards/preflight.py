"""One request's preflight: what it needs, what the guards found, and how that is told to the caller.

The lifecycle works out a request's ``Needs`` once (``needs_of``: its capabilities and a conservative
estimate of its context) and builds its ``Preflight`` around them; the router gives that to every
candidate's ``Admission``, and the capability and context guards record into it what did not fit. The
lifecycle turns it into response headers (``X-Interlock-Skipped``, ``X-Interlock-Preflight``). When
every candidate was skipped for what the request needs (not for health), the router raises
``refusal()``: a 400 whose code says what did not fit (``context_length_exceeded``, or
``model_not_supported`` for a capability), worded from the same estimate.

Capabilities: ``embedding`` for the embeddings endpoint; otherwise ``completion``, plus ``tools`` for a
non-empty ``tools``/``functions`` (unless ``tool_choice`` is ``none``), ``vision`` for any image part, and
``thinking`` when the caller requires reasoning (``think`` true or a level, ``reasoning_effort``
low/medium/high). ``reasoning_effort: minimal`` only *prefers* thinking: it is sent where a model thinks
and dropped (and said so) elsewhere.

The estimate is not a tokenizer. It counts two parts of the prompt, which a server's count follows
each in its own way (``learned.CountBook`` learns how, per endpoint and model): the *text* (messages,
``instructions``/``suffix``/``prompt`` where a surface has them) at UTF-8 bytes / 3.5 (real tokenizers
run 3.2 to 4.1 bytes a token on prose, Markdown and code), plus a sixth of the extra bytes of non-ASCII
characters (CJK: 3 bytes and often more than one token a character), and 4 tokens per message; and the
*structure* (tool schemas, tool calls, other JSON parts) as its JSON at bytes / 4 (3.8 to 4.3 bytes a
token measured), which a chat template may render in full, wrap in instructions, or drop. Then a fixed
reserve per image, and the requested output (``OUTPUT_KEYS``: ``max_completion_tokens``, ``max_tokens``,
``max_output_tokens``, a top-level ``num_predict`` as LiteLLM sends it, ``options.num_predict``, else the
plan's default), the plan's margin on top. ``bench/context_estimate.py`` measures how far it is from a
real server's count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from interlock.runtime.base.errors import (
    CandidateOutcome,
    CapabilityMissing,
    ContextTooLarge,
    InvalidRequest,
    RequestDoesNotFit,
)
from interlock.runtime.guards.ceiling import said
from interlock.runtime.loaded.access import COMMON
from interlock.runtime.loaded.tables import PreflightSettings

MESSAGE_OVERHEAD = 4  # role and separators around each message
OUTPUT_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens", "num_predict")  # in precedence
TEXT_KEYS = ("instructions", "suffix", "prompt")
IMAGE_PARTS = frozenset({"image_url", "input_image", "image"})
PLAIN_KEYS = frozenset({"model", "messages", "stream", "stream_options", "user", "temperature", "top_p"})
LEVELS = frozenset({"low", "medium", "high"})


@dataclass(slots=True)
class Needs:
    """Read-only once built (not frozen: a frozen dataclass costs microseconds per request to build)."""

    capabilities: frozenset[str]
    tokens: int  # the whole estimate: prompt, images, output, margin
    prompt_tokens: int  # text, messages and tool schemas only
    images: int
    output_tokens: int
    num_ctx: int | None  # the caller's own `options.num_ctx` (checked: a positive int within the cap)
    thinking: str  # "none" | "optional" | "required"
    schema_tokens: int = 0  # of the prompt's, the structure: tool schemas, tool calls, JSON parts
    counted: int = 0  # the request's tokens as an upstream counted them (its overflow error), when known


COMPLETION = frozenset({"completion"})
EMBEDDING = frozenset({"embedding"})


def chars_tokens(size: int) -> int:
    """``size`` UTF-8 bytes (or characters, where only they are counted) / 3.5, rounded up."""
    return (2 * size + 6) // 7


def text_tokens(text: str) -> int:
    """UTF-8 bytes / 3.5, plus a sixth of the bytes beyond the first of each non-ASCII character."""
    if text.isascii():
        return chars_tokens(len(text))
    size = len(text.encode())
    return chars_tokens(size) + (size - len(text) + 5) // 6


def needs_of(body: dict[str, Any], endpoint: str, settings: PreflightSettings) -> Needs:
    """The needs of one request to ``endpoint`` (``chat`` or ``embeddings``); 400 for a bad ``num_ctx``.

    Per request, so written for speed: plain ``dict`` checks (the body is parsed JSON), no set built
    for a plain completion."""
    options = body.get("options")
    if "num_ctx" in body:  # at the top level, as LiteLLM sends it; the Ollama adapter puts it in options
        num_ctx = _num_ctx(body["num_ctx"], "num_ctx", settings)
    elif type(options) is dict and "num_ctx" in options:
        num_ctx = _num_ctx(options["num_ctx"], "options.num_ctx", settings)
    else:
        num_ctx = None
    margin = 100 + settings.margin_percent
    if endpoint == "embeddings":
        tokens = _input_tokens(body.get("input"))
        return Needs(EMBEDDING, -(-tokens * margin // 100), tokens, 0, 0, num_ctx, "none")
    prompt = schema = 0
    images = 0
    messages = body.get("messages")
    for message in messages if type(messages) is list else ():
        if type(message) is not dict:
            continue
        prompt += MESSAGE_OVERHEAD
        content = message.get("content")
        if type(content) is str:
            prompt += text_tokens(content)
        elif type(content) is list:
            for part in content:
                kind = part.get("type") if type(part) is dict else None
                if kind == "text":
                    text = part.get("text")
                    prompt += text_tokens(text) if type(text) is str else 0
                elif kind in IMAGE_PARTS:
                    images += 1
                elif part is not None:
                    schema += _json_tokens(part)
        if message.get("tool_calls"):
            schema += _json_tokens(message["tool_calls"])
    capabilities = COMPLETION
    thinking = "none"
    output = settings.default_output_tokens
    if not PLAIN_KEYS.issuperset(body):  # more than model/messages/stream...: look further
        for key in TEXT_KEYS:
            value = body.get(key)
            if type(value) is str:
                prompt += text_tokens(value)
        extra: set[str] = set()
        tools = body.get("tools") or body.get("functions")
        if tools and body.get("tool_choice") != "none":
            extra.add("tools")
            schema += _json_tokens(tools)
        thinking = _thinking(body)
        if thinking == "required":
            extra.add("thinking")
        output = _output(body, options, output)
        if extra:
            capabilities = capabilities | extra
    if images:
        capabilities = capabilities | {"vision"}
    prompt += schema
    total = prompt + images * settings.image_reserve_tokens + output
    return Needs(capabilities, -(-total * margin // 100), prompt, images, output, num_ctx, thinking, schema)


def _json_tokens(value: Any) -> int:
    try:
        return (len(orjson.dumps(value)) + 3) // 4
    except TypeError:
        return 0


def _input_tokens(value: Any) -> int:
    if isinstance(value, str):
        return text_tokens(value)
    if isinstance(value, list):
        if value and all(isinstance(item, int) for item in value):
            return len(value)  # one token array
        return sum(_input_tokens(item) for item in value)
    return 0


def _output(body: dict[str, Any], options: Any, default: int) -> int:
    for key in OUTPUT_KEYS:
        value = body.get(key)
        if type(value) is int and value > 0:
            return value
    value = options.get("num_predict") if type(options) is dict else None
    return value if type(value) is int and value > 0 else default


def _thinking(body: dict[str, Any]) -> str:
    think = body.get("think")
    if think is True or think in LEVELS:
        return "required"
    if think is False:
        return "none"
    effort = body.get("reasoning_effort")
    if effort in LEVELS:
        return "required"
    if effort == "minimal":
        return "optional"
    return "none"


def _num_ctx(value: Any, where: str, settings: PreflightSettings) -> int | None:
    """The caller's ``num_ctx`` (``where``: ``options.num_ctx`` or top-level ``num_ctx``), checked."""
    if value is None:
        return None
    if not settings.caller_num_ctx:
        raise InvalidRequest(
            f"`{where}` is not accepted by this gateway: it sets the context of each model itself",
            param=where,
        )
    if not _positive(value) or not isinstance(value, int):  # (not narrowed first: mypyc makes True 1)
        raise InvalidRequest(
            f"`{where}` must be a positive integer, not {orjson.dumps(value).decode()[:40]}",
            param=where,
        )
    cap = settings.max_context_tokens
    if cap is not None and value > cap:
        raise InvalidRequest(
            f"`{where}` {value} is above this gateway's limit of {cap} tokens (preflight.max_context_tokens)",
            param=where,
        )
    return value


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


# -- what the guards found -------------------------------------------------------------------------

Header = tuple[bytes, bytes]
MAX_HEADER_ITEMS = 8  # a long chain must not make headers unbounded
CEILING_HEADER = b"x-interlock-max-tokens"  # the output limit sent, when lower than the caller's
DEFAULT_SETTINGS = PreflightSettings("enforce", 600, None, None, 1024, 2048, 15, True)
# what to change, by where the largest window came from (``fit.effective_context``'s source)
HINTS = {
    "declared": "declare the model's real window (`context_tokens`) if the server has more",
    "default": "set the worker's `default_context_tokens` (or `context_limits`) if the model can take more",
    "loaded": "load the model with a larger `num_ctx` (the worker's `default_context_tokens`, its Modelfile)",
    "modelfile": "raise the Modelfile's `num_ctx` or the worker's `default_context_tokens`",
    "caller": "send a larger `options.num_ctx`",
    "upstream said": "give the server a larger context (llama-server `--ctx-size`, vLLM `--max-model-len`)",
    "server's slot": "give each slot more: llama-server splits `--ctx-size` over its `--parallel` slots",
}


@dataclass(frozen=True, slots=True)
class Misfit:
    """A candidate that cannot serve the request: ``kind`` is ``context`` or ``capability``."""

    candidate: str
    kind: str
    reason: str  # the short metric label, e.g. ``lacks_vision``, ``context_too_small``
    detail: str  # for people: "lacks vision", "context 8192 < 41234 (loaded)"
    window: int | None = None  # context misfits: the largest window this candidate offered
    tokens: int | None = None  # context misfits: what the estimate needed there
    counted: int | None = None  # a context its server refused: the request's tokens by the server's count


MAX_CALLER_TIMEOUT_S = 86_400.0  # a caller's timeout above a day says nothing


class Preflight:
    """Built per request: a plain class (a dataclass with list factories costs more to build)."""

    __slots__ = (
        "attempts",
        "calling",
        "calling_since",
        "ceilings",
        "deferred",
        "misfits",
        "mode",
        "needs",
        "notes",
        "request_headers",
        "session",
        "settings",
        "skipped",
        "started",
        "turn",
        "walked_s",
    )

    def __init__(self, needs: Needs, mode: str, settings: PreflightSettings = DEFAULT_SETTINGS) -> None:
        self.needs = needs
        self.mode = mode  # "enforce" | "observe" | "off"
        self.settings = settings
        self.misfits: list[Misfit] = []
        self.skipped: list[str] = []
        self.notes: list[str] = []
        self.session: bytes | None = None  # the session header's value, when sticky sessions are on
        self.deferred: set[str] | None = None  # candidates a guard put after the rest of the chain
        self.ceilings: dict[str, bytes] | None = None  # candidate -> X-Interlock-Max-Tokens, when lowered
        self.turn = COMMON  # where it waits for a slot (``runtime.state.fair``): its caller's
        self.request_headers: list[tuple[bytes, bytes]] = []  # read only by ``deadline``
        self.started = 0.0  # when the request arrived (``time.perf_counter()``)
        # the walk so far, for the access log (``record.Walked``): its calls that failed or were
        # skipped, the candidate called now (and since when), the seconds its finished calls took
        self.attempts: list[CandidateOutcome] | None = None
        self.calling: str | None = None
        self.calling_since = 0.0
        self.walked_s = 0.0

    def deadline(self) -> float | None:
        """When the caller stops waiting (``time.perf_counter()``), from the timeout its SDK sends with
        every request (``X-Stainless-Timeout``, seconds: the OpenAI and Anthropic SDKs); None when it
        sent none. Read only when a retry is weighed, never on a request that needs none."""
        for name, value in self.request_headers:
            if name == b"x-stainless-timeout":
                try:
                    seconds = float(value)
                except ValueError:
                    return None
                return self.started + seconds if 0 < seconds < MAX_CALLER_TIMEOUT_S else None
        return None

    @property
    def enforcing(self) -> bool:
        return self.mode == "enforce"

    def defer(self, candidate: str) -> bool:
        """Whether ``candidate`` may be put after the rest of the chain: the first time only."""
        if self.deferred is None:
            self.deferred = set()
        elif candidate in self.deferred:
            return False
        self.deferred.add(candidate)
        return True

    def lowered(self, candidate: str, ceiling: int) -> None:
        """``candidate`` is sent ``ceiling`` as its output limit: lower than the caller's (or than what its
        credits or tokens per minute cut it to, which the context's ceiling then replaces)."""
        if self.ceilings is None:
            self.ceilings = {}
        self.ceilings[candidate] = said(ceiling, b"context")

    def note(self, text: str) -> None:
        if text not in self.notes and len(self.notes) < MAX_HEADER_ITEMS:
            self.notes.append(text)

    def overflowed(self, candidate: str, label: str, window: int | None, tokens: int | None) -> None:
        """The candidate's upstream refused the prompt as over its context: a context misfit (said in
        ``X-Interlock-Skipped``), and the rest of the walk needs more than that window (or the size the
        upstream counted), so the guard skips any later candidate known to be no larger."""
        said = (
            f"context {window} (upstream said)" if window is not None else "context too small (upstream said)"
        )
        detail = f"{said} on {label}" + (f", {tokens} tokens by its count" if tokens else "")
        self.misfits.append(Misfit(candidate, "context", "context_too_small", detail, window, counted=tokens))
        self.skipped.append(f"{candidate} (context_too_small, called)")  # called, not skipped
        floor = max(tokens or 0, window + 1 if window is not None else 0)  # of the whole request: an
        if floor > self.needs.counted:  # upstream's count may hold the completion too (vLLM's does)
            self.needs.counted = floor  # the one write to a built ``Needs``: the upstream counted better

    def headers(self, answered: str | None = None) -> list[Header]:
        """The preflight's response headers; ``answered``: the candidate that answered, if any."""
        out: list[Header] = []
        if answered is not None and self.ceilings is not None and answered in self.ceilings:
            out.append((CEILING_HEADER, self.ceilings[answered]))
        if self.skipped:
            out.append((b"x-interlock-skipped", _ascii(", ".join(self.skipped[:MAX_HEADER_ITEMS]))))
        if self.notes:
            out.append((b"x-interlock-preflight", _ascii("; ".join(self.notes))))
        return out

    def refusal(self, target: str, candidates: int) -> RequestDoesNotFit | None:
        """The 400 to answer when every one of ``candidates`` was skipped as a misfit; else None."""
        if not self.misfits or len({m.candidate for m in self.misfits}) < candidates:
            return None
        lacking = [m for m in self.misfits if m.kind == "capability"]
        listed = "; ".join(f"{m.candidate}: {m.detail}" for m in self.misfits[:MAX_HEADER_ITEMS])
        if lacking:
            needed = ", ".join(sorted(self.needs.capabilities - {"completion"}) or self.needs.capabilities)
            return CapabilityMissing(
                f"no candidate of {target} supports what this request needs ({needed}): {listed}",
                param="model",
            )
        context = [m for m in self.misfits if m.window is not None]
        widest = max(context, key=lambda m: m.window or 0) if context else None
        needs = self.needs
        tokens = widest.tokens if widest is not None and widest.tokens else needs.tokens
        largest = f"the largest context available is {widest.window} tokens" if widest else "no window fits"
        hint = _hint(widest.detail if widest is not None else "")
        strict = "" if self.settings.max_tokens_ceiling else ", or set `preflight.max_tokens: ceiling`"
        refused = max((m for m in context if m.counted), key=lambda m: m.counted or 0, default=None)
        if refused is not None:  # a server counted it, and refused it: its count, not the estimate
            size = f"this request is {refused.counted} tokens by {refused.candidate}'s server's own count"
        else:
            size = (
                f"this request needs about {tokens} tokens of context (an estimate, not the server's "
                f"count: {needs.prompt_tokens} prompt before calibration, {needs.images} image(s), "
                f"{needs.output_tokens} output, plus {self.settings.margin_percent}% margin)"
            )
        return ContextTooLarge(
            f"{size}; {largest} "
            f"in {target}: {listed}. To change it: {hint}; or send less (a shorter history, fewer "
            f"tools, a lower max_tokens){strict}; `preflight.mode: observe` lets every server decide",
            param="messages",
        )


def _hint(detail: str) -> str:
    """What would make the window larger, by the source a misfit's detail names (``context N (source)``)."""
    source = detail.partition("(")[2].partition(")")[0].removesuffix(", capped")
    return HINTS.get(source, "declare a larger window for the model")


def _ascii(text: str) -> bytes:
    return text.encode("ascii", "replace")
