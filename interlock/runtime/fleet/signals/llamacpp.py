"""llama.cpp's ``llama-server``: ``GET /metrics`` (with ``--metrics``) and ``GET /slots`` (where on).

``/metrics``: ``llamacpp:requests_processing``, ``llamacpp:requests_deferred``,
``llamacpp:kv_cache_usage_ratio`` (older builds; later ones dropped it) and ``llamacpp:kv_cache_tokens``,
as the server's README names them. ``/slots``: one object per slot; busy when ``is_processing`` is true
(newer builds) or ``state`` is not 0 (older ones, ``0`` = idle). Either path may be off: what answered is
read, and ``/metrics`` wins where both say how many run. llama-cpp-python's server (``python -m
llama_cpp.server``) serves neither (404 on both; see docs/runtime.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from interlock.runtime.fleet.signals.base import ServerKind, ServerLoad, highest, total
from interlock.runtime.fleet.signals.exposition import samples

RUNNING = "llamacpp:requests_processing"
DEFERRED = "llamacpp:requests_deferred"
KV = "llamacpp:kv_cache_usage_ratio"
TOKENS = "llamacpp:kv_cache_tokens"
NAMES = frozenset((RUNNING, DEFERRED, KV, TOKENS))


def read(bodies: Mapping[str, bytes]) -> ServerLoad:
    slots = busy = None
    listed = bodies.get("/slots")
    if listed is not None:
        slots, busy = _slots(orjson.loads(listed))
    found: dict[str, list[float]] = {}
    text = bodies.get("/metrics")
    if text is not None:
        found = samples(text.decode("utf-8", "replace"), NAMES)
        if RUNNING not in found and DEFERRED not in found and slots is None:
            raise ValueError("no llamacpp:requests_* in /metrics")
    running = total(found.get(RUNNING))
    return ServerLoad(
        running=running if running is not None else busy,
        waiting=total(found.get(DEFERRED)),
        slots=slots,
        kv_used=highest(found.get(KV)),
        cached_tokens=total(found.get(TOKENS)),
    )


def _slots(answer: Any) -> tuple[int, int]:
    """(slots, busy slots) from ``/slots``; ValueError when it is not a list of slot objects."""
    if not isinstance(answer, list) or not all(isinstance(slot, dict) for slot in answer):
        raise ValueError("/slots is not a list of slots")
    busy = sum(1 for slot in answer if slot.get("is_processing") is True or slot.get("state", 0) != 0)
    return len(answer), busy


KIND = ServerKind("llama.cpp", ("/slots", "/metrics"), read)
