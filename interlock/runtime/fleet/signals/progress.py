"""Whether a server is making progress on its work, from its own load readings: the first-byte deadline of a
call there is a no-progress deadline, not an estimate that runs out (issue 38, item 5).

Each reading of a server that reports what it is doing (``ServerLoad.working``: llama.cpp's ``/slots``
busy slots; vLLM's and SGLang's running and queued requests) comes with a progress key where it has one
(``ServerLoad.progress``: llama.cpp's per-slot task, prompt tokens processed and tokens decoded; vLLM's
and SGLang's prompt and generation token counters). The book keeps, per worker label, when that key last
moved while the server was working (``moved_at``; work that begins counts as a move).

A call whose first-byte deadline passes asks ``patience``: while the server says it is working and its
progress moved within the allowance, the deadline moves on to the allowance's end (re-asked then); when no
reading was taken since the call began (``SETTLE_S`` after it: a deadline shorter than the probe
interval), it moves on to when the next reading is due (``every_s``, the probe round's longest interval);
else the call times out as before. The allowance is the endpoint's own ``first_byte`` (the operator's word
for how long a silence may last), at least ``MIN_STALL_S`` and twice the longest gap between two moves
seen on that server (llama.cpp moves a prompt's count once per batch of 2,048 tokens: 22 s at 93 tokens/s,
100 s on a loaded 1-thread CPU). A server with no progress key (no counters in its ``/metrics``) is taken
as progressing while it says it is working: the call's ``total`` still bounds it. The same readings decide
whether a first-byte timeout counts towards the circuit (``busy``): never while the server reports work in
progress (it says it is working, and moved within twice the allowance).

Readings come from the probe loop (``fetch.py``), every ``probe_interval``: a reading that failed makes
the server's work unknown (no patience) until the next one answers. The request path tests ``label in
servers`` (a read-only view: no call into this module for a cloud); a watched endpoint's copy is made
once and looked up after (``watched``); ``patience`` runs only once a deadline has passed."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from interlock.runtime.base.clock import Clock
from interlock.runtime.fleet.signals.base import ServerLoad
from interlock.runtime.wire.base import Endpoint

MIN_STALL_S = 120.0  # a server that says it works is given at least this long between two moves
MAX_STALL_S = 600.0  # and never more (the longest gap seen is clamped to this)
MIN_EXTEND_S = 0.5  # a deadline moved on is moved at least this far
SETTLE_S = 1.0  # a reading this soon after a call began may not show it yet (the server queues it)
MAX_WATCHED = 4096  # watched copies of endpoints kept (oldest dropped first)


@dataclass(slots=True)
class _Server:
    working: bool = False
    progress: tuple[int, ...] | None = None
    read_at: float = 0.0
    gap_s: float = 0.0  # between its last two readings: when the next is due
    moved_at: float = 0.0  # the last reading whose progress differed from the one before (or began)
    longest_gap_s: float = 0.0  # the longest time between two moves seen while working


class ProgressBook:
    """Per worker label, what its server last said of its work and when its progress last moved."""

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._servers: dict[str, _Server] = {}
        # the labels read, a read-only live view: the router tests ``label in servers`` (no call into
        # this module per request) before it asks for a watched copy
        self.servers: Mapping[str, object] = MappingProxyType(self._servers)
        self._watched: dict[int, tuple[Endpoint, Endpoint]] = {}  # id(endpoint) -> (it, its copy)
        self.waited = 0  # first-byte deadlines moved on because the server made progress
        self.every_s = 0.0  # the most between two readings (the probe round's; set by the fetcher)

    def watched(self, endpoint: Endpoint) -> Endpoint:
        """``endpoint`` with ``patience`` where its server's progress is read (a copy made once per
        endpoint and looked up after: one dictionary read a call), else as it is."""
        if endpoint.label not in self._servers:
            return endpoint
        known = self._watched.get(id(endpoint))
        if known is not None and known[0] is endpoint:  # (the endpoint it holds keeps its id unique)
            return known[1]
        patience = functools.partial(self.patience, endpoint.label, endpoint.first_byte_s)
        copy = dataclasses.replace(endpoint, patience=patience)
        if len(self._watched) >= MAX_WATCHED:
            del self._watched[next(iter(self._watched))]
        self._watched[id(endpoint)] = (endpoint, copy)
        return copy

    def read(self, label: str, load: ServerLoad | None) -> None:
        """One reading of the server behind ``label`` (None: it failed: its work is unknown now)."""
        now = self.clock()
        server = self._servers.get(label)
        if server is None:
            server = self._servers[label] = _Server()
        if server.read_at:
            server.gap_s = now - server.read_at
        working = load is not None and load.working
        if not working:
            server.working = False
            server.progress = None
            server.read_at = now
            return
        assert load is not None
        if not server.working or load.progress is None or load.progress != server.progress:
            if server.working and server.moved_at:
                gap = min(now - server.moved_at, MAX_STALL_S)
                server.longest_gap_s = max(server.longest_gap_s, gap)
            server.moved_at = now
        server.working = True
        server.progress = load.progress
        server.read_at = now

    def keep(self, labels: frozenset[str]) -> None:
        """Forget the servers no longer read."""
        for label in [label for label in self._servers if label not in labels]:
            del self._servers[label]

    def allowance_s(self, label: str, first_byte_s: float) -> float:
        """How long the server behind ``label`` may go without a move before a call there times out."""
        server = self._servers.get(label)
        gap = server.longest_gap_s if server is not None else 0.0
        return max(first_byte_s, MIN_STALL_S, 2.0 * gap)

    def patience(self, label: str, first_byte_s: float, elapsed_s: float) -> float | None:
        """Seconds more a call waiting ``elapsed_s`` for its first byte from ``label``'s server may
        wait (its server says it is working and moved within the allowance; or no reading was taken
        since the call began, and the next is due within a reading's gap), None: time it out now."""
        server = self._servers.get(label)
        if server is None:
            return None
        now = self.clock()
        every = max(self.every_s, server.gap_s)
        if server.read_at < now - elapsed_s + SETTLE_S and every > 0:  # not read since the call began
            due = server.read_at + every + MIN_EXTEND_S
            if due > now:
                self.waited += 1
                return max(due - now, MIN_EXTEND_S)
        if not server.working:
            return None
        left = server.moved_at + self.allowance_s(label, first_byte_s) - now
        if left <= 0:
            return None
        self.waited += 1
        return max(left, MIN_EXTEND_S)

    def busy(self, label: str, first_byte_s: float) -> bool:
        """Whether a first-byte timeout on ``label`` came while its server reported work in progress
        (then it never counts towards the circuit): it says it is working, and its progress moved within
        twice the allowance (a server wedged mid-task longer than that counts again)."""
        server = self._servers.get(label)
        if server is None or not server.working:
            return False
        return self.clock() - server.moved_at <= 2.0 * self.allowance_s(label, first_byte_s)

    def report(self, label: str) -> dict[str, Any] | None:
        """For /v1/health: whether it works, and when its progress last moved (seconds ago)."""
        server = self._servers.get(label)
        if server is None:
            return None
        now = self.clock()
        return {
            "working": server.working,
            "moved_s_ago": round(now - server.moved_at, 1) if server.working else None,
            "stall_allowance_s": round(self.allowance_s(label, 0.0), 1),
        }
