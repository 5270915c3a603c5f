"""What answers taught, shared by the replicas through Redis (``SharedLearning``): one hash,
``<prefix>:learned``, a field per (book, server, model) holding its row as JSON, newest written last.

Written every ``learned_kept.SAVE_INTERVAL_S`` by each replica (only the rows it learned since), read
then and at start; the books keep a row only when it is newer than their own and passes the same
checks as an answer. The hash expires ``TTL_S`` after its last write, and holds at most ``MAX_FIELDS``
fields (a replica that reads more drops the oldest), so a store shared with old plans does not grow.
A store that cannot be reached is logged (once per outage) and skipped: learning goes on per process.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson

from interlock.runtime.state.base import SharedLearning

log = logging.getLogger("interlock.state")

TTL_S = 30 * 86400
MAX_FIELDS = 16_384
MAX_ROW_BYTES = 4096


class RedisLearning(SharedLearning):
    __slots__ = ("_client", "_failing", "key")

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client  # the slot backend's (``RedisSlots.client``): its pool and timeouts
        self.key = f"{prefix}:learned"
        self._failing = False

    async def push(self, rows: Mapping[str, Mapping[str, object]]) -> None:
        if not rows:
            return
        mapping = {name: orjson.dumps(row) for name, row in rows.items()}
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.hset(self.key, mapping=mapping)
            pipe.expire(self.key, TTL_S)
            await pipe.execute()
        except Exception as exc:
            self._failed(exc)
            return
        self._failing = False

    async def pull(self) -> dict[str, object]:
        try:
            raw: dict[Any, Any] = await self._client.hgetall(self.key)
        except Exception as exc:
            self._failed(exc)
            return {}
        self._failing = False
        rows: dict[str, object] = {}
        for name, value in raw.items():
            if len(value) > MAX_ROW_BYTES:
                continue
            try:
                rows[name.decode() if isinstance(name, bytes) else str(name)] = orjson.loads(value)
            except (orjson.JSONDecodeError, UnicodeDecodeError):
                continue
        if len(rows) > MAX_FIELDS:
            await self._trim(rows)
        return rows

    async def _trim(self, rows: dict[str, object]) -> None:
        """Drop the oldest fields past ``MAX_FIELDS`` (by each row's ``at``)."""

        def at(name: str) -> float:
            row = rows[name]
            when = row.get("at") if isinstance(row, dict) else None
            return float(when) if isinstance(when, int | float) else 0.0

        old = sorted(rows, key=at)[: len(rows) - MAX_FIELDS]
        for name in old:
            del rows[name]
        try:
            await self._client.hdel(self.key, *old)
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        if not self._failing:
            log.warning("learned values not shared: the store is unreachable (%s)", type(exc).__name__)
        self._failing = True
