"""What one request needs, estimated once per request: its capabilities and its tokens (``needs_of``).

A request-level module: the lifecycle works the estimate out once, and the preflight
(``guards.preflight``), the usage metering, the credits and what answers teach (``learned``) all read it.

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

from interlock.runtime.base.errors import InvalidRequest
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
