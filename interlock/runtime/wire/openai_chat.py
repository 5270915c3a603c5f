"""OpenAI Chat Completions rules shared by its surface and by the adapters that translate to and from it."""

from __future__ import annotations

import random
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import orjson

NO_EXTRAS: Mapping[str, Any] = MappingProxyType({})  # a request whose format keeps nothing for its answers


def call_arguments(arguments: Any) -> Any:
    """A tool call's ``arguments`` as the object they encode: a JSON string parsed (a blank one is
    ``{}``), anything else as it is (``None`` is ``{}``). Raises ``ValueError`` for a string that is
    not JSON: each caller decides what that means (a client's answer gets ``{}``, a request to an
    upstream that takes objects cannot be carried)."""
    if isinstance(arguments, str):
        return orjson.loads(arguments) if arguments.strip() else {}
    return {} if arguments is None else arguments


def completion_id() -> str:
    """A fresh ``chat.completion`` id (for answers translated from another format)."""
    return f"chatcmpl-{random.getrandbits(96):024x}"


def first_choice(result: Mapping[str, Any]) -> dict[str, Any]:
    """The first choice of an OpenAI-shaped answer (empty when there is none)."""
    choice: dict[str, Any] = (result.get("choices") or [{}])[0]
    return choice


def reasoning(part: Mapping[str, Any]) -> Any:
    """The reasoning text of an answer's message or a stream's delta: providers name it either way."""
    return part.get("reasoning") or part.get("reasoning_content")


def cached_tokens(usage: Mapping[str, Any]) -> int:
    """How much of an OpenAI usage's prompt was read from the provider's cache (0 when unsaid)."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return cached if isinstance(cached, int) and not isinstance(cached, bool) else 0
