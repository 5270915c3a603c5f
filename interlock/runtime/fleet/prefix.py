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
key), 64 bits; a collision only makes a worker look warmer than it is. The index models each
(worker, model)'s cache as the prompts it holds (``PrefixIndex``: one per slot plus spares for a
server worker, a slot's cache replaced by the next prompt it serves), is bounded (``MAX_BLOCKS`` for
all workers together) and lives in this process only.

What a hit is worth: the prefill seconds it saves, the hit's characters / ``CHARS_PER_TOKEN`` over the
worker's learned prompt speed (``learned.PrefillBook``: llama-server's ``timings``, usage over the time
taken, Ollama's ``prompt_eval_count`` / ``prompt_eval_duration``; an EWMA per (worker, model), else the
model's on any worker, else ``learned.DEFAULT_PREFILL_TOKENS_PER_S``). Scoring (``runtime.fleet.scoring``)
weighs it with the wait there and with what the prompt's arrival would evict.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from interlock.runtime.books.learned import PrefillBook

MAX_BLOCKS = 65_536  # index keys, all workers and models together (about 6 MB)
MIN_PREFIX_CHARS = 256  # shorter prompts: nothing worth routing for (a few ms of prefill at most)
CHARS_PER_TOKEN = 4.0  # the usual estimate for English text and JSON
MAX_CACHES = 4096  # (worker, model) caches modelled, least recently served dropped first
SIMILARITY = 0.1  # llama-server's slot_prompt_similarity: a prompt this like a slot's reuses that slot


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


class _Cache:
    """One (worker, model)'s cache as the gateway models it: the prompts its slots hold, least recently
    served first, and how many of them hold each block."""

    __slots__ = ("held", "prompts")

    def __init__(self) -> None:
        self.held: dict[int, int] = {}  # block hash -> prompts holding it
        self.prompts: OrderedDict[int, tuple[tuple[int, ...], int, float]] = OrderedDict()
        # key (a serial) -> (the prompt's block hashes, its characters, when it was served)

    def run(self, hashes: tuple[int, ...]) -> int:
        """The longest run of leading blocks of ``hashes`` some held prompt starts with (bisection:
        the hashes are chained, so if block k is held, so is every block before it)."""
        held = self.held
        low, high = 0, len(hashes)  # hashes[:low] are held; hashes[high:] are not
        while low < high:
            middle = (low + high + 1) // 2
            if hashes[middle - 1] in held:
                low = middle
            else:
                high = middle - 1
        return low

    def drop(self, key: int) -> int:
        """Forget one prompt; the blocks it freed."""
        hashes, _, _ = self.prompts.pop(key)
        held, freed = self.held, 0
        for value in hashes:
            left = held[value] - 1
            if left:
                held[value] = left
            else:
                del held[value]
                freed += 1
        return freed


class PrefixIndex:
    """Per (worker, model): the prompts its cache holds, as chained block hashes, bounded by what the
    server keeps (``capacity``: its slots, each slot's cache replaced by the next prompt it serves, plus
    the prompts it keeps beside them), and all workers together by ``max_blocks``.

    Serving a prompt replaces the held prompt it shares at least ``SIMILARITY`` of its characters with
    (llama-server gives a request the slot whose cached prompt is most like it, above its
    ``slot_prompt_similarity``, 0.1), else takes a new place, the least recently served prompt
    evicted when the cache is full."""

    def __init__(self, max_blocks: int = MAX_BLOCKS, prefill: PrefillBook | None = None) -> None:
        self.max_blocks = max_blocks
        self.prefill = prefill if prefill is not None else PrefillBook()
        self._caches: OrderedDict[tuple[str, str], _Cache] = OrderedDict()
        self._blocks = 0  # blocks held, all caches together
        self._serial = 0
        self.sent = 0  # requests with a prefix sent (all time)
        self.hits = 0  # of those, sent to a worker that held some of their prefix
        self.evicted = 0  # prompts evicted to make room (all time)

    def __len__(self) -> int:
        return self._blocks

    def matched(self, label: str, model: str, prefix: Prefix) -> int:
        """Characters of ``prefix`` the worker holds (its longest run of leading blocks there)."""
        cache = self._caches.get((label, model))
        low = cache.run(prefix.hashes) if cache is not None else 0
        return prefix.ends[low - 1] if low else 0

    def look(
        self, label: str, model: str, prefix: Prefix, capacity: int | None, now: float, idle_s: float
    ) -> tuple[int, int]:
        """(characters of ``prefix`` the worker holds, characters of the held prompt serving it there
        would evict: 0 when it replaces the prompt it extends, the cache has room, or the victim was
        last served more than ``idle_s`` ago)."""
        cache = self._caches.get((label, model))
        if cache is None:
            return 0, 0
        low = cache.run(prefix.hashes)
        chars = prefix.ends[low - 1] if low else 0
        if capacity is None or len(cache.prompts) < capacity or chars >= SIMILARITY * prefix.ends[-1]:
            return chars, 0
        _, victim, served_at = next(iter(cache.prompts.values()))
        return chars, victim if now - served_at <= idle_s else 0

    def saved_s(self, label: str, model: str, prefix: Prefix) -> float:
        """The prefill seconds a hit on the worker would save (0: no hit)."""
        chars = self.matched(label, model, prefix)
        if not chars:
            return 0.0
        return chars / CHARS_PER_TOKEN / self.prefill.tokens_per_s(label, model)

    def served(
        self,
        label: str,
        model: str,
        prefix: Prefix,
        *,
        hit: bool = False,
        capacity: int | None = None,
        now: float = 0.0,
    ) -> None:
        """The worker was sent ``prefix`` (``hit``: it held some of it): its cache holds it now, in
        place of the prompt it extends, else of the least recently served one once ``capacity``
        prompts are held (None: only ``max_blocks`` bounds it)."""
        self.sent += 1
        self.hits += hit
        key = (label, model)
        cache = self._caches.pop(key, None)
        if cache is None:
            cache = _Cache()
            if len(self._caches) >= MAX_CACHES:
                _, old = self._caches.popitem(last=False)
                self._blocks -= len(old.held)
        self._caches[key] = cache
        hashes = prefix.hashes
        low = cache.run(hashes)
        if low and prefix.ends[low - 1] >= SIMILARITY * prefix.ends[-1]:
            anchor = hashes[low - 1]
            for serial in reversed(cache.prompts):  # the newest holder of the run: the slot it reuses
                held = cache.prompts[serial][0]
                if len(held) >= low and held[low - 1] == anchor:
                    self._blocks -= cache.drop(serial)
                    break
        held_blocks = cache.held
        for value in hashes:
            count = held_blocks.get(value, 0)
            held_blocks[value] = count + 1
            self._blocks += not count
        self._serial += 1
        cache.prompts[self._serial] = (hashes, prefix.ends[-1], now)
        while capacity is not None and len(cache.prompts) > max(capacity, 1):
            self._blocks -= cache.drop(next(iter(cache.prompts)))
            self.evicted += 1
        while self._blocks > self.max_blocks and self._caches:
            oldest_key, oldest = next(iter(self._caches.items()))
            if not oldest.prompts:
                self._caches.pop(oldest_key)
                continue
            self._blocks -= oldest.drop(next(iter(oldest.prompts)))

    def report(self) -> dict[str, Any]:
        return {
            "blocks": self._blocks,
            "prompts": sum(len(cache.prompts) for cache in self._caches.values()),
            "sent": self.sent,
            "hits": self.hits,
            "evicted": self.evicted,
            "prefill_tokens_per_s": self.prefill.snapshot(),
        }
