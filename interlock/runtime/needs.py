"""What a request needs, worked out once per request: capabilities, and a conservative context estimate.

Capabilities: ``embedding`` for the embeddings endpoint; otherwise ``completion``, plus ``tools`` for a
non-empty ``tools``/``functions`` (unless ``tool_choice`` is ``none``), ``vision`` for any image part, and
``thinking`` when the caller requires reasoning (``think`` true or a level, ``reasoning_effort``
low/medium/high). ``reasoning_effort: minimal`` only *prefers* thinking: it is sent where a model thinks
and dropped (and said so) elsewhere.

The estimate is not a tokenizer. It counts UTF-8 bytes / 3 for text (English runs near 4 characters a
token, code and most other scripts fewer; CJK is 3 bytes a character and about one token), 4 tokens per
message, tool schemas as their JSON, ``instructions``/``suffix``/``prompt`` where a surface has them, a
fixed reserve per image, the requested output (``max_completion_tokens``, ``max_tokens``,
``max_output_tokens``, ``options.num_predict``, else the plan's default), then the plan's margin on top.
``bench/context_estimate.py`` measures how far it is from a real tokenizer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from interlock.runtime.errors import InvalidRequest
from interlock.runtime.plan import PreflightSettings

MESSAGE_OVERHEAD = 4  # role and separators around each message
OUTPUT_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens")
TEXT_KEYS = ("instructions", "suffix", "prompt")
LEVELS = frozenset({"low", "medium", "high"})


@dataclass(frozen=True, slots=True)
class Needs:
    capabilities: frozenset[str]
    tokens: int  # the whole estimate: prompt, images, output, margin
    prompt_tokens: int  # text, messages and tool schemas only
    images: int
    output_tokens: int
    num_ctx: int | None  # the caller's own `options.num_ctx` (checked: a positive int within the cap)
    thinking: str  # "none" | "optional" | "required"


def text_tokens(text: str) -> int:
    size = len(text) if text.isascii() else len(text.encode())
    return (size + 2) // 3


def needs_of(body: Mapping[str, Any], endpoint: str, settings: PreflightSettings) -> Needs:
    """The needs of one request to ``endpoint`` (``chat`` or ``embeddings``); 400 for a bad ``num_ctx``."""
    num_ctx = _num_ctx(body, settings)
    if endpoint == "embeddings":
        tokens = _input_tokens(body.get("input"))
        total = math.ceil(tokens * (100 + settings.margin_percent) / 100)
        return Needs(frozenset({"embedding"}), total, tokens, 0, 0, num_ctx, "none")
    prompt = 0
    images = 0
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, Mapping):
            continue
        prompt += MESSAGE_OVERHEAD
        content = message.get("content")
        if isinstance(content, str):
            prompt += text_tokens(content)
        elif isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, Mapping) else None
                if kind == "text":
                    text = part.get("text")
                    prompt += text_tokens(text) if isinstance(text, str) else 0
                elif kind in ("image_url", "input_image", "image"):
                    images += 1
                elif part is not None:
                    prompt += _json_tokens(part)
        calls = message.get("tool_calls")
        if calls:
            prompt += _json_tokens(calls)
    for key in TEXT_KEYS:
        value = body.get(key)
        if isinstance(value, str):
            prompt += text_tokens(value)
    capabilities = {"completion"}
    tools = body.get("tools") or body.get("functions")
    if tools and body.get("tool_choice") != "none":
        capabilities.add("tools")
        prompt += _json_tokens(tools)
    if images:
        capabilities.add("vision")
    thinking = _thinking(body)
    if thinking == "required":
        capabilities.add("thinking")
    output = _output(body, settings)
    total = prompt + images * settings.image_reserve_tokens + output
    total = math.ceil(total * (100 + settings.margin_percent) / 100)
    return Needs(frozenset(capabilities), total, prompt, images, output, num_ctx, thinking)


def _json_tokens(value: Any) -> int:
    try:
        return (len(orjson.dumps(value)) + 2) // 3
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


def _output(body: Mapping[str, Any], settings: PreflightSettings) -> int:
    options = body.get("options")
    values = [body.get(key) for key in OUTPUT_KEYS]
    values.append(options.get("num_predict") if isinstance(options, Mapping) else None)
    for value in values:
        if isinstance(value, int) and _positive(value):
            return value
    return settings.default_output_tokens


def _thinking(body: Mapping[str, Any]) -> str:
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


def _num_ctx(body: Mapping[str, Any], settings: PreflightSettings) -> int | None:
    options = body.get("options")
    value = options.get("num_ctx") if isinstance(options, Mapping) else None
    if value is None:
        return None
    if not settings.caller_num_ctx:
        raise InvalidRequest(
            "`options.num_ctx` is not accepted by this gateway: it sets the context of each model itself",
            param="options.num_ctx",
        )
    if not isinstance(value, int) or not _positive(value):
        raise InvalidRequest(
            f"`options.num_ctx` must be a positive integer, not {orjson.dumps(value).decode()[:40]}",
            param="options.num_ctx",
        )
    cap = settings.max_context_tokens
    if cap is not None and value > cap:
        raise InvalidRequest(
            f"`options.num_ctx` {value} is above this gateway's limit of {cap} tokens "
            "(preflight.max_context_tokens)",
            param="options.num_ctx",
        )
    return value


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
