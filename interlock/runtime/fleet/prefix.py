"""Prefix affinity: which worker last served a prompt's prefix, and what a hit there is worth.

A request's prompt is cut into blocks at its natural seams, in the order a server's KV cache holds
them: the tool schemas, then each message (a system prompt, every earlier turn, the new one). Each
block's hash is chained on the one before (``hash((previous, role, content))``), so block ``k``
names the whole prefix up to it: two requests whose first ``k`` blocks are equal share the first
``k`` hashes, and no later one. This is llm-d's prefix-cache scorer (chained block hashes, an LRU of
them per server, the longest run of leading blocks found on a server is its hit), with blocks at
message seams instead of every 64 tokens: a multi-turn conversation or a shared system prompt
matches as well, and the cost per request is one hash of each message's text (a C loop over its
bytes) and a few dictionary lookups per worker, no serialising of the body. A message too long to
share (the newest turn) costs its hash and nothing else.

Only hashes are kept, never the text: Python's ``hash`` of ``str`` (SipHash with this process's random
key), 64 bits; a collision only makes a worker look warmer than it is. The index is bounded
(``MAX_BLOCKS`` keys, least recently served dropped first) and lives in this process only.

What a hit is worth: the prefill seconds it saves, the hit's characters / ``CHARS_PER_TOKEN`` over the
worker's learned prompt speed (``PrefillBook``: Ollama's ``prompt_eval_count`` / ``prompt_eval_duration``
of real answers, an EWMA per (worker, model), else the model's on any worker, else
``DEFAULT_PREFILL_TOKENS_PER_S``). Scoring subtracts it from the worker's expected seconds to start
(``runtime.fleet.scoring``): a warm worker wins while its queue costs less than the prefill it saves.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

MAX_BLOCKS = 65_536  # index keys, all workers and models together (about 6 MB)
MIN_PREFIX_CHARS = 256  # shorter prompts: nothing worth routing for (a few ms of prefill at most)
CHARS_PER_TOKEN = 4.0  # the usual estimate for English text and JSON
DEFAULT_PREFILL_TOKENS_PER_S = 1_000.0  # before any prompt timing is learned (a small GPU, a fast CPU)
MIN_PROMPT_TOKENS = 32  # shorter prompt evaluations say more about overhead than speed
MAX_RATES = 4096


@dataclass(frozen=True, slots=True)
class Prefix:
    """One request's chained block hashes and, per block, the characters up to its end."""

    hashes: tuple[int, ...]
    ends: tuple[int, ...]


def prompt_prefix(body: Mapping[str, Any]) -> Prefix | None:
    """The blocks of a chat request's prompt (``tools``, then each of ``messages``); None when it has
    no messages or is shorter than ``MIN_PREFIX_CHARS``."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    hashes: list[int] = []
    ends: list[int] = []
    chain, size = 0, 0
    tools = body.get("tools")
    if tools:
        schemas = _text(tools)
        size += len(schemas)
        chain = hash((chain, "tools", schemas))
        hashes.append(chain)
        ends.append(size)
    for message in messages:
        if type(message) is not dict and not isinstance(message, Mapping):  # parsed JSON: a dict
            return None
        content = message.get("content")
        text: str = content if type(content) is str else _text(content)
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            text += _text(message["tool_calls"])
        size += len(text)
        chain = hash((chain, role, text))
        hashes.append(chain)
        ends.append(size)
    if size < MIN_PREFIX_CHARS:
        return None
    return Prefix(tuple(hashes), tuple(ends))


def _text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(type(value))


class PrefillBook:
    """Learned prompt tokens/s per (endpoint label, model): Ollama's own prompt timings, and the other
    kinds' answers (``runtime.learned``: llama-server's ``timings``, else usage over the time taken)."""

    def __init__(self, smoothing: float = 0.3) -> None:
        self.smoothing = smoothing
        self._rates: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._models: dict[str, float] = {}  # model -> the last learned rate on any worker

    def observe(self, label: str, model: str, final: Mapping[str, Any]) -> None:
        """Ollama's final message of a finished chat: its prompt tokens and the time they took."""
        count, duration = final.get("prompt_eval_count"), final.get("prompt_eval_duration")
        if not isinstance(count, int) or not isinstance(duration, int) or isinstance(count, bool):
            return
        if count < MIN_PROMPT_TOKENS or duration <= 0:
            return
        self.record(label, model, count / (duration / 1e9))

    def record(self, label: str, model: str, tokens_per_s: float) -> None:
        key = (label, model)
        old = self._rates.pop(key, None)
        rate = tokens_per_s if old is None else self.smoothing * tokens_per_s + (1 - self.smoothing) * old
        self._rates[key] = rate
        self._models[model] = rate
        while len(self._rates) > MAX_RATES:
            self._rates.popitem(last=False)
        if len(self._models) > MAX_RATES:
            del self._models[next(iter(self._models))]

    def learned(self, label: str, model: str) -> float | None:
        """The rate learned of ``model`` on that endpoint, None before its first sample there."""
        return self._rates.get((label, model))

    def tokens_per_s(self, label: str, model: str) -> float:
        rate = self._rates.get((label, model))
        if rate is None:
            rate = self._models.get(model, DEFAULT_PREFILL_TOKENS_PER_S)
        return rate

    def snapshot(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for (label, model), rate in sorted(self._rates.items()):
            out.setdefault(label, {})[model] = round(rate, 1)
        return out


class PrefixIndex:
    """Block hash (salted per worker and model) -> None, in least-recently-served order, bounded."""

    def __init__(self, max_blocks: int = MAX_BLOCKS, prefill: PrefillBook | None = None) -> None:
        self.max_blocks = max_blocks
        self.prefill = prefill if prefill is not None else PrefillBook()
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self._salts: dict[tuple[str, str], int] = {}
        self.sent = 0  # requests with a prefix sent (all time)
        self.hits = 0  # of those, sent to a worker that held some of their prefix

    def __len__(self) -> int:
        return len(self._blocks)

    def _salt(self, label: str, model: str) -> int:
        key = label, model
        salt = self._salts.get(key)
        if salt is None:
            if len(self._salts) >= MAX_RATES:
                self._salts.clear()  # forgets every worker's blocks: rare (that many worker x model pairs)
            salt = self._salts[key] = hash(key)
        return salt

    def matched(self, label: str, model: str, prefix: Prefix) -> int:
        """Characters of ``prefix`` the worker served last (its longest run of leading blocks here).

        Blocks are recorded a whole prompt at a time, so a run is found by bisection: if block k is
        here, so (nearly always) are the blocks before it."""
        salt = self._salt(label, model)
        blocks, hashes = self._blocks, prefix.hashes
        low, high = 0, len(hashes)  # blocks[:low] are here; blocks[high:] are not
        while low < high:
            middle = (low + high + 1) // 2
            if hashes[middle - 1] ^ salt in blocks:
                low = middle
            else:
                high = middle - 1
        return prefix.ends[low - 1] if low else 0

    def saved_s(self, label: str, model: str, prefix: Prefix) -> float:
        """The prefill seconds a hit on the worker would save (0: no hit)."""
        chars = self.matched(label, model, prefix)
        if not chars:
            return 0.0
        return chars / CHARS_PER_TOKEN / self.prefill.tokens_per_s(label, model)

    def served(self, label: str, model: str, prefix: Prefix, *, hit: bool = False) -> None:
        """The worker was sent ``prefix`` (``hit``: it held some of it): its KV cache holds it now."""
        self.sent += 1
        self.hits += hit
        salt = self._salt(label, model)
        blocks = self._blocks
        for value in prefix.hashes:
            key = value ^ salt
            if key in blocks:
                blocks.move_to_end(key)
            else:
                blocks[key] = None
        while len(blocks) > self.max_blocks:
            blocks.popitem(last=False)

    def report(self) -> dict[str, Any]:
        return {
            "blocks": len(self._blocks),
            "sent": self.sent,
            "hits": self.hits,
            "prefill_tokens_per_s": self.prefill.snapshot(),
        }
