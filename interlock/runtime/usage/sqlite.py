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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from interlock.runtime.usage.base import (
    CREATE_TABLE,
    Account,
    RowKey,
    Store,
    Tally,
    UsageStoreError,
    row_values,
    rows_sql,
    spent_sql,
    upsert_sql,
)

BUSY_TIMEOUT_MS = 5000
UPSERT = upsert_sql("?")
SPENT = spent_sql("?")


class SqliteStore(Store):
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
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise UsageStoreError(f"{self.shown}: cannot open the usage ledger: {reason}") from exc
        except sqlite3.Error as exc:
            raise UsageStoreError(f"{self.shown}: cannot open the usage ledger: {exc}") from exc
        self._db = db

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise UsageStoreError(f"{self.shown}: the usage ledger is not open")
        return self._db

    async def add(self, rows: Mapping[RowKey, Tally]) -> None:
        values = [row_values(key, tally) for key, tally in rows.items()]
        await asyncio.to_thread(self._add, values)

    def _add(self, values: list[tuple[str | int, ...]]) -> None:
        db = self._conn()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(UPSERT, values)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise UsageStoreError(f"{self.shown}: cannot write the usage ledger: {exc}") from exc

    async def spent(self, since_day: str) -> dict[Account, Tally]:
        rows = await asyncio.to_thread(self._query, SPENT, (since_day,))
        return {(row[0], row[1]): Tally(*(int(v or 0) for v in row[2:])) for row in rows}

    async def rows(self, since_day: str | None, tenant: str | None) -> list[tuple[RowKey, Tally]]:
        sql = rows_sql("?", since_day is not None, tenant is not None)
        args = tuple(v for v in (since_day, tenant) if v is not None)
        found = await asyncio.to_thread(self._query, sql, args)
        return [((r[0], r[1], r[2], r[3]), Tally(*(int(v) for v in r[4:]))) for r in found]

    def _query(self, sql: str, args: tuple[str, ...]) -> list[tuple[Any, ...]]:
        try:
            return list(self._conn().execute(sql, args))
        except sqlite3.Error as exc:
            raise UsageStoreError(f"{self.shown}: cannot read the usage ledger: {exc}") from exc

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await asyncio.to_thread(db.close)
