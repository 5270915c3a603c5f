"""llama.cpp's ``llama-server``: ``GET /metrics`` (with ``--metrics``) and ``GET /slots`` (where on).

``/metrics``: ``llamacpp:requests_processing``, ``llamacpp:requests_deferred``, and in older builds
``llamacpp:kv_cache_usage_ratio`` and ``llamacpp:kv_cache_tokens`` (the README's list); the 2026 builds
(as PyPI's ``xllamacpp`` 2026.10 embeds it: tests/fixtures/signals/llama-server, captured) have neither.
``/slots``: one object per slot; busy when ``is_processing`` is true (newer builds) or ``state`` is not 0
(older ones, ``0`` = idle). A slot keeps its last prompt in its KV cache after it ends (``id_task``,
``n_prompt_tokens`` stay, ``is_processing`` false): the tokens the slots hold (their ``n_prompt_tokens`` and
``next_token[0].n_decoded``) stand for ``cached_tokens`` where ``/metrics`` has no ``kv_cache_tokens``. No
KV fraction is made up from them: each slot owns its share of the context, so a full slot is no reason to
defer. A busy slot's task, ``n_prompt_tokens_processed`` (which moves once per batch of a prefill) and
``n_decoded`` are its progress (``signals/progress.py``). Each slot's ``n_ctx`` is the window one request
gets (``--ctx-size`` split over ``--parallel``): the smallest is the server's ``window``, which the context
guard and the cold routes take over a declared one that is larger. Either path may be off: what answered is
read, and ``/metrics`` wins where both say how many run. llama-cpp-python's server (``python -m
llama_cpp.server``) serves neither (404 on both; see docs/runtime.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from interlock.common.bounds import window as bounded_window
from interlock.runtime.fleet.signals.base import ServerKind, ServerLoad, highest, total
from interlock.runtime.fleet.signals.exposition import samples

RUNNING = "llamacpp:requests_processing"
DEFERRED = "llamacpp:requests_deferred"
KV = "llamacpp:kv_cache_usage_ratio"
TOKENS = "llamacpp:kv_cache_tokens"
NAMES = frozenset((RUNNING, DEFERRED, KV, TOKENS))


def read(bodies: Mapping[str, bytes]) -> ServerLoad:
    slots = busy = held = progress = window = None
    listed = bodies.get("/slots")
    if listed is not None:
        answer = orjson.loads(listed)
        slots, busy, held = _slots(answer)
        progress = _progress(answer)
        window = _window(answer)
    found: dict[str, list[float]] = {}
    text = bodies.get("/metrics")
    if text is not None:
        found = samples(text.decode("utf-8", "replace"), NAMES)
        if RUNNING not in found and DEFERRED not in found and slots is None:
            raise ValueError("no llamacpp:requests_* in /metrics")
    running = total(found.get(RUNNING))
    cached = total(found.get(TOKENS))
    return ServerLoad(
        running=running if running is not None else busy,
        waiting=total(found.get(DEFERRED)),
        slots=slots,
        kv_used=highest(found.get(KV)),
        cached_tokens=cached if cached is not None else held,
        progress=progress,
        window=window,
    )


def _window(answer: list[dict[str, Any]]) -> int | None:
    """The smallest slot's context (``n_ctx``, bounded as every window a server reports); None when no
    slot says."""
    said = [w for slot in answer if (w := bounded_window(slot.get("n_ctx"))) is not None]
    return min(said) if said else None


def _progress(answer: list[dict[str, Any]]) -> tuple[int, ...]:
    """The busy slots' (id, task, prompt tokens processed, tokens decoded), flat: it changes once per
    batch of a prefill (2,048 tokens) and once per token decoded."""
    key: list[int] = []
    for slot in answer:
        if slot.get("is_processing") is True or slot.get("state", 0) != 0:
            step = slot.get("next_token")
            first = step[0] if isinstance(step, list) and step else step
            decoded = first.get("n_decoded") if isinstance(first, Mapping) else None
            for value in (
                slot.get("id"),
                slot.get("id_task"),
                slot.get("n_prompt_tokens_processed"),
                decoded,
            ):
                key.append(value if isinstance(value, int) and not isinstance(value, bool) else -1)
    return tuple(key)


def _slots(answer: Any) -> tuple[int, int, int | None]:
    """(slots, busy slots, tokens they hold or None) from ``/slots``; ValueError when it is not a list
    of slot objects."""
    if not isinstance(answer, list) or not all(isinstance(slot, dict) for slot in answer):
        raise ValueError("/slots is not a list of slots")
    busy = sum(1 for slot in answer if slot.get("is_processing") is True or slot.get("state", 0) != 0)
    counts = [_held(slot) for slot in answer]
    known = [count for count in counts if count is not None]
    return len(answer), busy, sum(known) if known else None


def _held(slot: Mapping[str, Any]) -> int | None:
    """The tokens one slot holds: its prompt and what it generated; None when it does not say."""
    prompt = slot.get("n_prompt_tokens")
    if not isinstance(prompt, int) or isinstance(prompt, bool):
        return None
    step = slot.get("next_token")
    first = step[0] if isinstance(step, list) and step else step
    decoded = first.get("n_decoded") if isinstance(first, Mapping) else None
    return max(prompt, 0) + (decoded if isinstance(decoded, int) and decoded > 0 else 0)


KIND = ServerKind("llama.cpp", ("/slots", "/metrics"), read)
