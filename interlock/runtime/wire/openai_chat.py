"""OpenAI Chat Completions rules shared by its surface and by the adapters that translate to and from it."""

from __future__ import annotations

import random
from typing import Any

import orjson


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
