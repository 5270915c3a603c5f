"""What the usage ledger costs: per request on the request path, and per commit in the writer.

- request path: ``request_tally`` + ``Ledger.debit`` for one answered request (what the lifecycle adds
  to every request), with its share of the fold (``Ledger._fold``, one per ``flush_debits`` debits,
  the default 256: the writer's or the next reader's), beside a plain dictionary increment as the floor;
- writer: one commit of a batch of debits (``--batch`` rows, spread over 20 accounts and 3 models) to a
  SQLite file (WAL) and to a real PostgreSQL started for the run (tests/postgres_server.py), in ms.

Figures are from one run on whatever machine runs it; read the ratios, not the absolutes.

    .venv/bin/python bench/usage_ledger.py [--requests 200000] [--batch 256] [--commits 50]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from interlock.runtime.books.estimate import Needs
from interlock.runtime.books.record import RequestRecord
from interlock.runtime.usage import open_store
from interlock.runtime.usage.base import RowKey, Store, Tally
from interlock.runtime.usage.ledger import Ledger, LedgerSettings
from interlock.runtime.usage.memory import MemoryStore
from interlock.runtime.usage.metering import request_tally

NEEDS = Needs(frozenset({"completion"}), 60, 20, 0, 30, None, "none")


class _Answered:  # the one attribute request_tally reads
    result: ClassVar[dict[str, Any]] = {
        "choices": [{"message": {"content": "hi"}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4},
    }


def request_path(requests: int) -> tuple[float, float]:
    """µs of CPU per request: the ledger's work, and a dictionary increment (the floor)."""
    ledger = Ledger(MemoryStore(), LedgerSettings())  # no writer: a full batch folds at its last debit
    record = RequestRecord("chat", b"x")
    record.answered = _Answered()  # type: ignore[assignment]
    accounts = [(f"team-{i % 5}", f"key-{i}") for i in range(20)]
    started = time.process_time()
    for i in range(requests):
        ledger.debit(accounts[i % 20], "cloud/gpt-4o-mini", request_tally(record, NEEDS, (0.15, 0.6)))
    ledger.spent(accounts[0])  # the last debits folded too
    ledger_us = (time.process_time() - started) / requests * 1e6
    counts: dict[tuple[str, str], int] = {}
    started = time.process_time()
    for i in range(requests):
        account = accounts[i % 20]
        counts[account] = counts.get(account, 0) + 1
    floor_us = (time.process_time() - started) / requests * 1e6
    return ledger_us, floor_us


def batch(size: int, day: str) -> dict[RowKey, Tally]:
    rows: dict[RowKey, Tally] = {}
    for i in range(size):
        key = (day, f"team-{i % 5}", f"key-{i % 20}", ("cloud/a", "cloud/b", "box/c")[i % 3])
        rows.setdefault(key, Tally()).add(Tally(1, 100, 40, 70, 0))
    return rows


async def commits(store: Store, size: int, rounds: int) -> float:
    """ms of wall time per commit of one batch (median of ``rounds``)."""
    await store.open()
    times = []
    try:
        for i in range(rounds):
            rows = batch(size, f"2026-12-{1 + i % 28:02d}")
            started = time.perf_counter()
            await store.add(rows)
            times.append((time.perf_counter() - started) * 1000)
    finally:
        await store.close()
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--commits", type=int, default=50)
    args = parser.parse_args()
    ledger_us, floor_us = request_path(args.requests)
    print(f"request path: {ledger_us:.2f} µs per request (tally + debit); dict increment {floor_us:.2f} µs")
    folder = Path(tempfile.mkdtemp(prefix="usage-bench-"))
    try:
        sqlite_ms = asyncio.run(
            commits(open_store(f"sqlite:{folder / 'usage.db'}"), args.batch, args.commits)
        )
        print(
            f"commit of {args.batch} debits ({len(batch(args.batch, 'x'))} rows): sqlite {sqlite_ms:.2f} ms"
        )
        try:
            from tests.postgres_server import PostgresServer

            server = PostgresServer().start()
        except BaseException as exc:  # pytest.skip's exception when PostgreSQL is missing
            print(f"postgresql: not measured ({exc})")
            return
        try:
            pg_ms = asyncio.run(commits(open_store(server.new_database()), args.batch, args.commits))
            print(
                f"commit of {args.batch} debits: postgresql {pg_ms:.2f} ms ({pg_ms / sqlite_ms:.1f}x sqlite)"
            )
        finally:
            server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
