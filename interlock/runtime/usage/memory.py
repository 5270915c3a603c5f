"""``memory:``: the ledger's rows kept in this process only (nothing survives a restart)."""

from __future__ import annotations

from collections.abc import Mapping

from interlock.runtime.base.mypyc_marks import mypyc_attr
from interlock.runtime.usage.base import Account, RowKey, Store, Tally

MAX_BATCHES = 4096
"""Batch ids remembered (a replay comes right after the try it repeats): then forgotten at once."""


@mypyc_attr(allow_interpreted_subclasses=True)  # test doubles subclass it (runtime/base/mypyc_marks.py)
class MemoryStore(Store):
    shown = "memory:"
    shared = False  # this process's alone: nothing to read back

    def __init__(self) -> None:
        self._rows: dict[RowKey, Tally] = {}
        self._batches: set[str] = set()  # this process's only: a reply is never lost (bounded below)

    async def open(self) -> None:
        pass

    async def add(self, rows: Mapping[RowKey, Tally], batch: str | None = None) -> None:
        if batch is not None:
            if batch in self._batches:
                return
            if len(self._batches) >= MAX_BATCHES:
                self._batches.clear()
            self._batches.add(batch)
        for key, tally in rows.items():
            self._rows.setdefault(key, Tally()).add(tally)

    async def spent(self, since_day: str) -> dict[Account, Tally]:
        sums: dict[Account, Tally] = {}
        for (day, tenant, key_id, _model), tally in self._rows.items():
            if day >= since_day:
                sums.setdefault((tenant, key_id), Tally()).add(tally)
        return sums

    async def rows(self, since_day: str | None, tenant: str | None) -> list[tuple[RowKey, Tally]]:
        return sorted(
            (
                (key, tally.copy())
                for key, tally in self._rows.items()
                if (since_day is None or key[0] >= since_day) and (tenant is None or key[1] == tenant)
            ),
            key=lambda row: row[0],
        )

    async def close(self) -> None:
        pass
