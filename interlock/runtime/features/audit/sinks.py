"""Where audit lines go: one row per sink kind in ``SINKS``, chosen by the target's scheme.

A sink is handed whole batches by the audit log's one writer task, never by the request path. Its
``write`` may block the writer (a slow disk, a database round trip), never a request: while it is busy,
new events wait in the bounded queue, or are dropped and counted when the queue is full.

    file   ``PATH`` or ``file:PATH``: JSON lines appended to a file (created 0600), written in a thread
    (the credits ledger's database adds its row here: ``sqlite:...`` / ``postgresql://...``)
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from interlock.runtime.base.clock import MillisClock


class SinkError(Exception):
    """A sink could not be opened (bad target) or could not take a batch (the batch is counted lost)."""


class Sink(abc.ABC):
    """One destination for audit events."""

    @abc.abstractmethod
    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        """Store a batch (in order); raise ``SinkError`` or ``OSError`` when it could not be stored."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Flush and release; called once, after the last ``write``."""

    @property
    @abc.abstractmethod
    def describe(self) -> str:
        """Where it writes, for logs and the startup line (no credential)."""


def line(event: dict[str, Any], clock: MillisClock) -> bytes:
    """One event as a JSON line; ``time`` (epoch seconds) becomes ISO 8601 UTC with milliseconds."""
    at = event.get("time")
    if isinstance(at, float | int):
        event = {**event, "time": clock.iso(at)}
    return orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE)


class JsonLinesFile(Sink):
    """Appends one JSON object a line to a file, a batch per ``os.write`` (in a thread), unbuffered:
    with ``O_APPEND``, the processes of ``--workers N`` can share one file without tearing lines."""

    def __init__(self, path: str) -> None:
        self.path = path
        flags = os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self._readable = True  # to read its last byte (``_append``); a write-only file goes without
        try:
            try:
                self._fd = os.open(path, os.O_RDWR | flags, 0o600)
            except PermissionError:
                self._fd, self._readable = os.open(path, os.O_WRONLY | flags, 0o600), False
        except OSError as exc:
            raise SinkError(f"cannot open the audit log {path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(os.fstat(self._fd).st_mode):
            os.close(self._fd)
            raise SinkError(f"the audit log {path} is not a regular file")
        self._clock = MillisClock()

    @property
    def describe(self) -> str:
        return self.path

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        clock = self._clock
        data = b"".join(line(event, clock) for event in events)
        await asyncio.to_thread(self._append, data)

    def _append(self, data: bytes) -> None:
        """Write ``data`` whole or not at all: a write that fails part way (a full disk, a file size
        limit) is cut back off, so the file never holds a torn line for the next batch to run into
        (unless another process appended meanwhile: then its lines are left alone).

        A process killed in the middle of a write (SIGKILL, the OOM killer: the kernel stops a write
        to a file between pages once a fatal signal is pending) cannot cut its part back off: the file
        then ends in a torn line. So a batch that finds the file not ending in a newline starts with
        one: the torn line stays one line of its own, which a reader skips, and never swallows the
        next whole line (at worst, when another writer was mid-write, an empty line is added)."""
        start = os.lseek(self._fd, 0, os.SEEK_END)
        if start and self._readable and os.pread(self._fd, 1, start - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                written += os.write(self._fd, view[written:])
        except OSError:
            if written:
                with contextlib.suppress(OSError):
                    if os.fstat(self._fd).st_size == start + written:
                        os.ftruncate(self._fd, start)
            raise

    async def close(self) -> None:
        os.close(self._fd)


SINKS: Mapping[str, Callable[[str], Sink]] = {
    "file": JsonLinesFile,
}
"""Sink kinds by scheme; a target without a known ``scheme:`` prefix is a file path."""


def open_sink(target: str) -> Sink:
    """The sink for ``--audit-log TARGET``: ``scheme:rest`` by ``SINKS``, else a file path."""
    scheme, colon, rest = target.partition(":")
    if colon and scheme in SINKS:
        return SINKS[scheme](rest)
    if colon and rest.startswith("//"):
        raise SinkError(
            f"unknown audit sink {scheme + '://'!r}; expected a file path or one of {sorted(SINKS)}"
        )
    return JsonLinesFile(target)
