"""``sqlite:PATH``: the ledger in one SQLite file, in WAL mode (the default, under ``--state-dir``).

Every call runs in a thread (``asyncio.to_thread``): the event loop never waits on the disk. One
connection, used by the ledger's one writer task, so calls never overlap. WAL with ``synchronous=NORMAL``:
a commit is in the WAL file before ``add`` returns, so a killed process (SIGKILL) loses nothing committed;
a power cut may lose the last commits (the WAL is synced at checkpoints). ``busy_timeout`` lets the
processes of ``--workers N`` share the file: each waits for the other's short write transaction.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from interlock.runtime.usage.base import UsageRowsRefused, UsageStoreError
from interlock.runtime.usage.sql import CREATE_BATCHES, CREATE_TABLE, SqlStore, batches_cutoff

BUSY_TIMEOUT_MS = 5000


class SqliteStore(SqlStore):
    mark = "?"

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.shown = f"sqlite:{path}"
        self._db: sqlite3.Connection | None = None

    def missing(self) -> str | None:
        return None if self.path.is_file() else f"no usage ledger at {self.path}"

    async def open(self) -> None:
        await asyncio.to_thread(self._open)

    def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)  # as the state file of learned speeds
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute(CREATE_TABLE)
            db.execute(CREATE_BATCHES)
        except OSError as os_error:
            reason = os_error.strerror or str(os_error)
            raise UsageStoreError(f"{self.shown}: cannot open the usage ledger: {reason}") from os_error
        except sqlite3.Error as exc:
            raise UsageStoreError(f"{self.shown}: cannot open the usage ledger: {exc}") from exc
        self._db = db

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise UsageStoreError(f"{self.shown}: the usage ledger is not open")
        return self._db

    async def write(self, values: list[tuple[str | int, ...]], batch: str | None) -> None:
        await asyncio.to_thread(self._write, values, batch)

    def _write(self, values: list[tuple[str | int, ...]], batch: str | None) -> None:
        db = self._conn()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                if batch is None or db.execute(self.claim, (batch,)).rowcount:  # 0: in already
                    db.executemany(self.upsert, values)
                    if batch is not None:
                        db.execute(self.prune, (batches_cutoff(time.time()),))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except (OverflowError, sqlite3.IntegrityError, sqlite3.DataError) as refused:  # rolled back
            raise UsageRowsRefused(f"{self.shown}: the usage ledger refused a batch: {refused}") from refused
        except sqlite3.Error as exc:
            raise UsageStoreError(f"{self.shown}: cannot write the usage ledger: {exc}") from exc

    async def query(self, sql: str, args: tuple[str, ...]) -> list[tuple[Any, ...]]:
        return await asyncio.to_thread(self._query, sql, args)

    def _query(self, sql: str, args: tuple[str, ...]) -> list[tuple[Any, ...]]:
        try:
            return list(self._conn().execute(sql, args))
        except sqlite3.Error as exc:
            raise UsageStoreError(f"{self.shown}: cannot read the usage ledger: {exc}") from exc

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await asyncio.to_thread(db.close)
