"""A server's own tokenizer, asked how many tokens a chat prompt is (``OpenAIAdapter.count``; only for
``count_tokens``, never on a chat request's path): one function per way a server offers it, in
``TOKENIZE``, and ``Tokenizers``, which way each server was found to speak.

- ``llama``: llama-server renders the prompt with its chat template (``POST /apply-template``, the
  messages and tools as a chat request sends them) and counts it (``POST /tokenize`` with
  ``add_special`` and ``parse_special``, as its chat endpoint tokenizes): exactly the ``prompt_tokens``
  its answer to that request reports.
- ``vllm``: vLLM's ``POST /tokenize`` (SGLang's too) takes the chat ``messages`` (and ``tools``) and
  answers ``count``.

What comes back is a border: a count that is not a non-negative int under ``MAX_TOKENS`` is no count.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from interlock.runtime.base.errors import UpstreamError
from interlock.runtime.net.transport import Transport
from interlock.runtime.upstream.exchange import request_json
from interlock.runtime.wire.base import Endpoint

LLAMA, VLLM, NONE = "llama", "vllm", "none"
NO_TOKENIZER_S = 600.0  # a server that has none is asked again after this
FAILED_S = 60.0  # one whose tokenizer failed otherwise (refused us, timed out, 5xx): asked again after
MAX_SERVERS = 1024
MAX_TOKENS = 1 << 30  # a count above this is not one

Tokenize = Callable[[Transport, Endpoint, dict[str, Any]], Awaitable[int | None]]


async def llama(client: Transport, endpoint: Endpoint, payload: dict[str, Any]) -> int | None:
    rendered = await request_json(client, endpoint, "POST", "/apply-template", orjson.dumps(payload))
    prompt = rendered.get("prompt")
    if type(prompt) is not str:
        return None
    asked = {"content": prompt, "add_special": True, "parse_special": True}
    tokens = (await request_json(client, endpoint, "POST", "/tokenize", orjson.dumps(asked))).get("tokens")
    return len(tokens) if type(tokens) is list and len(tokens) < MAX_TOKENS else None


async def vllm(client: Transport, endpoint: Endpoint, payload: Mapping[str, Any]) -> int | None:
    asked = {k: payload[k] for k in ("model", "messages", "tools") if k in payload}
    asked["add_generation_prompt"] = True
    count = (await request_json(client, endpoint, "POST", "/tokenize", orjson.dumps(asked))).get("count")
    return count if type(count) is int and 0 <= count < MAX_TOKENS else None


TOKENIZE: Mapping[str, Tokenize] = {LLAMA: llama, VLLM: vllm}


class Tokenizers:
    """Which way each server root was found to tokenize (``LLAMA``, ``VLLM``), or that it is not to be
    asked (``NONE``: it has none, for ``NO_TOKENIZER_S``; its tokenizer failed, for ``FAILED_S``, so a
    server that refuses us or times out costs ``count_tokens`` one wait a minute, not one per call);
    bounded, oldest first out."""

    __slots__ = ("_clock", "_found")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._found: OrderedDict[str, tuple[str, float]] = OrderedDict()  # root -> (style, until)

    def style(self, root: str) -> str | None:
        """The way ``root`` tokenizes, ``NONE``, or None while it is not known (try them in turn)."""
        found = self._found.get(root)
        if found is None or self._clock() > found[1]:
            return None
        return found[0]

    def found(self, root: str, style: str) -> None:
        self._keep(root, style, NO_TOKENIZER_S if style == NONE else math.inf)

    def failed(self, root: str) -> None:
        """Its tokenizer failed other than by not being there: not asked again for ``FAILED_S``."""
        self._keep(root, NONE, FAILED_S)

    async def count(self, client: Transport, root: Endpoint, payload: dict[str, Any]) -> int | None:
        """The prompt's tokens by the tokenizer of the server at ``root`` (its URL the server's root):
        the way it was found to speak, else each in turn, learning which (``OpenAIAdapter.count``)."""
        where = root.url
        style = self.style(where)
        if style == NONE:
            return None
        for name in (style,) if style else (LLAMA, VLLM):
            try:
                counted = await TOKENIZE[name](client, root, payload)
            except UpstreamError as exc:
                if exc.status in (404, 405, 501):
                    continue
                self.failed(where)  # refused us, timed out, 5xx: not asked again for a minute
                return None
            if counted is not None:
                self.found(where, name)
                return counted
        self.found(where, NONE)
        return None

    def _keep(self, root: str, style: str, for_s: float) -> None:
        self._found.pop(root, None)
        self._found[root] = (style, self._clock() + for_s)
        while len(self._found) > MAX_SERVERS:
            self._found.popitem(last=False)
