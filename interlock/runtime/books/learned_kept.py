"""What answers taught (``runtime.learned``: prompt counts and prompt speeds) kept across restarts and
shared by replicas, never on the request path.

- The state file (``serve --state-dir DIR``: ``DIR/learned.json``): read at start, written atomically
  (off the event loop) every ``SAVE_INTERVAL_S`` when something was learned since, and at stop.
- The shared store (``--state-url redis://``: ``SlotBackend.shared_learning``): read at start and every
  ``SAVE_INTERVAL_S``, the rows this replica learned since the last write pushed then (and at stop); a
  row replaces this replica's own only when it is newer.

Both are borders: every row is checked as an answer is (``CountBook.restore``, ``PrefillBook.restore``),
so a hand-edited file or another writer's row cannot teach what an answer could not; rows older than
``learned.MAX_AGE_S`` are left out, and an older row weighs less against the next answer (the books'
half-lives). A missing file is a first start; an unreadable one a warning, never a failed start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from interlock.runtime.base.fileio import write_atomically
from interlock.runtime.books.learned import Learned
from interlock.runtime.state.base import SharedLearning

log = logging.getLogger("interlock.learned")

STATE_KIND = "interlock-learned"
STATE_VERSION = 1
SAVE_INTERVAL_S = 30.0
MAX_FILE_BYTES = 16 * 1024 * 1024
BOOKS = ("counts", "prefill")


class KeptLearned:
    """The lifespan step that keeps ``learned`` (``start``, ``stop``; ``save`` and ``share`` for tests)."""

    __slots__ = ("_file", "_learned", "_pushed", "_saved", "_shared", "_task")

    def __init__(
        self, learned: Learned, file: Callable[[], Path | None], shared: SharedLearning | None = None
    ) -> None:
        self._learned = learned
        self._file = file
        self._shared = shared
        self._task: asyncio.Task[None] | None = None
        self._saved = (0, 0)  # the books' versions last written: nothing learned, nothing to write
        self._pushed = 0.0  # wall-clock seconds up to which this replica's rows are in the store

    async def start(self) -> None:
        path = self._file()
        if path is not None:
            await asyncio.to_thread(self._read, path)
            self._saved = self._versions()
        if self._shared is not None:
            await self._pull()
        if path is not None or self._shared is not None:
            self._task = asyncio.ensure_future(self._keep())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.share()
        await self.save()

    async def save(self) -> None:
        """Write the state file, off the event loop, when something was learned since the last write."""
        path = self._file()
        versions = self._versions()
        if path is None or versions == self._saved:
            return
        document = {"kind": STATE_KIND, "version": STATE_VERSION} | {
            book: getattr(self._learned, book).rows() for book in BOOKS
        }
        try:
            await asyncio.to_thread(_write, path, document)
        except OSError as exc:
            log.warning("%s: cannot write what answers taught: %s", path, exc.strerror or exc)
            return
        self._saved = versions

    async def share(self) -> None:
        """Push the rows learned since the last push to the shared store, then take the others' newer."""
        shared = self._shared
        if shared is None:
            return
        since, now = self._pushed, self._learned.counts.wall()
        rows: dict[str, dict[str, Any]] = {}
        for book in BOOKS:
            for row in getattr(self._learned, book).rows(since):
                rows[f"{book} {row['server']} {row['model']}"] = row
        await shared.push(rows)
        self._pushed = now
        await self._pull()

    async def _pull(self) -> None:
        assert self._shared is not None
        pulled = await self._shared.pull()
        for book in BOOKS:
            rows = [row for name, row in pulled.items() if name.startswith(book + " ")]
            getattr(self._learned, book).restore(rows, newer=True)

    def _read(self, path: Path) -> None:
        try:
            with path.open("rb") as file:
                raw = file.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("%s: cannot read what answers taught (%s); learning from the start", path, exc)
            return
        try:
            data = orjson.loads(raw) if len(raw) <= MAX_FILE_BYTES else None
        except orjson.JSONDecodeError:
            data = None
        shape = (data.get("kind"), data.get("version")) if isinstance(data, dict) else None
        if not isinstance(data, dict) or shape != (STATE_KIND, STATE_VERSION):
            log.warning("%s: not an interlock learned-state file (version %d); ignored", path, STATE_VERSION)
            return
        taken = {book: getattr(self._learned, book).restore(data.get(book)) for book in BOOKS}
        counts, prefill = taken["counts"], taken["prefill"]
        log.info("%s: %d prompt counts and %d prompt speeds restored", path, counts, prefill)

    def _versions(self) -> tuple[int, int]:
        return self._learned.counts.version, self._learned.prefill.version

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(SAVE_INTERVAL_S)
            await self.share()
            await self.save()


def _write(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(str(path), orjson.dumps(document).decode() + "\n")
