"""``postgresql://...``: the ledger in one PostgreSQL table shared by every replica (psycopg 3, async).

Each replica adds its own batches (``INSERT ... ON CONFLICT DO UPDATE`` adds to the row, so replicas
never overwrite each other's counts) and reads the sums back every refresh (``ledger.Ledger``). One
connection per process, used by the ledger's one writer task; a connection that broke is opened again on
the next call. The URL's password never appears in a log or an error (``shown`` is host, port, database).
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from interlock.runtime.usage.base import UsageRowsRefused, UsageStoreError
from interlock.runtime.usage.sql import CREATE_BATCHES, CREATE_TABLE, SqlStore, batches_cutoff

CONNECT_TIMEOUT_S = 5


def shown_url(url: str) -> str:
    """``postgresql://HOST:PORT/DB`` of a connection URL: no user, no password, no options."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error:
        return "postgresql://(unreadable URL)"
    host = parts.get("host") or "localhost"
    return f"postgresql://{host}:{parts.get('port') or 5432}/{parts.get('dbname') or ''}"


class PostgresStore(SqlStore):
    mark = "%s"

    def __init__(self, url: str) -> None:
        self.url = url
        self.shown = shown_url(url)
        self._db: psycopg.AsyncConnection[Any] | None = None

    async def open(self) -> None:
        db = await self._conn()
        try:
            async with db.transaction():
                await db.execute(CREATE_TABLE)
                await db.execute(CREATE_BATCHES)
        except psycopg.Error as exc:
            raise self._error("cannot create the usage table", exc) from exc

    async def _conn(self) -> psycopg.AsyncConnection[Any]:
        if self._db is not None and not self._db.closed and not self._db.broken:
            return self._db
        try:
            self._db = await psycopg.AsyncConnection.connect(
                self.url, connect_timeout=CONNECT_TIMEOUT_S, application_name="interlock-usage"
            )
        except psycopg.Error as exc:
            raise self._error("cannot connect", exc) from exc
        return self._db

    def _error(self, what: str, exc: psycopg.Error) -> UsageStoreError:
        # psycopg's messages name the host and the user, never the password
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return UsageStoreError(f"{self.shown}: {what}: {reason}")

    async def write(self, values: list[tuple[str | int, ...]], batch: str | None) -> None:
        db = await self._conn()
        try:
            async with db.transaction(), db.cursor() as cur:
                if batch is not None:
                    await cur.execute(self.claim, (batch,))
                    if not cur.rowcount:  # committed already: a replay of a commit whose reply was lost
                        return
                await cur.executemany(self.upsert, values)
                if batch is not None:
                    await cur.execute(self.prune, (batches_cutoff(time.time()),))
        except (psycopg.DataError, psycopg.IntegrityError) as refused:  # the server answered: rolled back
            reason = self._error("the usage ledger refused a batch", refused)
            raise UsageRowsRefused(str(reason)) from refused
        except psycopg.Error as exc:
            raise self._error("cannot write the usage ledger", exc) from exc

    async def query(self, sql: str, args: tuple[str, ...]) -> list[tuple[Any, ...]]:
        db = await self._conn()
        try:
            async with db.transaction(), db.cursor() as cur:
                await cur.execute(sql, args)
                return list(await cur.fetchall())
        except psycopg.Error as exc:
            raise self._error("cannot read the usage ledger", exc) from exc

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await db.close()
