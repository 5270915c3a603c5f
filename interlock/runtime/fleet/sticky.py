"""Sticky sessions (KV-cache affinity, opt-in): the repeat turns of a conversation go to one worker.

A session is named by the request header ``routing.sticky.header`` (``X-Session-ID``) when present,
else by the first ``prefix_bytes`` of the messages up to and including the first user message (the
same for every later turn of the conversation). Either way only a digest is kept, never the text:
``blake2b(candidate id, source, value)``, 16 bytes, so a session is scoped per model.

The table is an LRU of at most ``max_sessions`` entries; an entry unused for ``idle_ttl`` is forgotten.
A pinned worker is used only while it is still eligible for the request (healthy, able to serve it):
otherwise the request is scored as usual and the session is repinned to the worker chosen.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from interlock.runtime.base.clock import Clock
from interlock.runtime.loaded.tables import StickySettings

Header = tuple[bytes, bytes]


def session_header(scope: Mapping[str, Any], name: bytes) -> bytes | None:
    """The value of request header ``name`` (lower-case), when present and not empty."""
    headers: Sequence[Header] = scope["headers"]
    for key, value in headers:
        if key == name:
            return value or None
    return None


def session_key(
    candidate_id: str, header: bytes | None, body: Mapping[str, Any], prefix: int
) -> bytes | None:
    """The session's digest for ``candidate_id``; None when the request names no session and has no
    messages to name one by."""
    digest = hashlib.blake2b(candidate_id.encode(), digest_size=16)
    if header is not None:
        digest.update(b"\x00header\x00" + header)
        return digest.digest()
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    head = []
    for message in messages:
        head.append(message)
        if isinstance(message, Mapping) and message.get("role") == "user":
            break
    try:
        text = orjson.dumps(head)
    except TypeError:
        return None
    digest.update(b"\x00messages\x00" + text[:prefix])
    return digest.digest()


class StickyTable:
    """Session digest -> worker, LRU-bounded, idle entries expire. Survives plan reloads."""

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._pins: OrderedDict[bytes, tuple[str, float]] = OrderedDict()
        self.repinned = 0

    def __len__(self) -> int:
        return len(self._pins)

    def worker(self, key: bytes, settings: StickySettings) -> str | None:
        """The worker ``key`` is pinned to, or None (never pinned, or idle past ``idle_ttl``)."""
        pin = self._pins.get(key)
        if pin is None:
            return None
        if self.clock() - pin[1] > settings.idle_ttl_s:
            del self._pins[key]
            return None
        return pin[0]

    def pin(self, key: bytes, worker: str, settings: StickySettings) -> None:
        old = self._pins.pop(key, None)
        if old is not None and old[0] != worker:
            self.repinned += 1
        self._pins[key] = (worker, self.clock())
        while len(self._pins) > settings.max_sessions:
            self._pins.popitem(last=False)
