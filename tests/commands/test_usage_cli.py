"""`interlock usage` on real ledgers (a SQLite file, a real PostgreSQL): sums per tenant, key and model
over the days asked for, as a table or JSON; clear errors when the ledger cannot be read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from interlock.cli import main
from interlock.commands.usage import since_day
from interlock.runtime.usage import open_store
from interlock.runtime.usage.base import RowKey, Tally
from tests.postgres_server import PostgresServer

ROWS: dict[RowKey, Tally] = {
    ("2026-11-20", "team-a", "key-1", "cloud/gpt-4o-mini"): Tally(1, 10, 5, 100, 0),
    ("2026-12-01", "team-a", "key-1", "cloud/gpt-4o-mini"): Tally(3, 120, 45, 1234, 0),
    ("2026-12-02", "team-a", "key-1", "cloud/gpt-4o-mini"): Tally(1, 30, 5, 66, 0),
    ("2026-12-01", "team-b", "ci", "box/qwen3:8b"): Tally(2, 50, 20, 0, 2),
}


def write(url: str) -> None:
    async def fill() -> None:
        store = open_store(url)
        await store.open()
        await store.add(ROWS)
        await store.close()

    asyncio.run(fill())


def test_the_table_sums_days_per_tenant_key_and_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(f"sqlite:{tmp_path / 'usage.db'}")
    assert main(["usage", "--state-dir", str(tmp_path), "--since", "2026-12-01"]) == 0
    assert capsys.readouterr().out == (
        "usage since 2026-12-01 (UTC)\n"
        "TENANT  KEY    MODEL              REQUESTS  PROMPT  COMPLETION      COST  ESTIMATED\n"
        "team-a  key-1  cloud/gpt-4o-mini         4     150          50  0.001300          0\n"
        "team-b  ci     box/qwen3:8b              2      50          20  0.000000          2\n"
        "total                                    6     200          70  0.001300          2\n"
    )


def test_json_for_one_tenant_from_postgres(
    postgres_server: PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = postgres_server.new_database()
    write(url)
    assert (
        main(["usage", "--usage-url", url, "--since", "all", "--tenant", "team-a", "--format", "json"]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["rows"] == [
        {
            "tenant": "team-a",
            "key_id": "key-1",
            "model": "cloud/gpt-4o-mini",
            "requests": 5,
            "prompt_tokens": 160,
            "completion_tokens": 55,
            "cost": 0.0014,
            "estimated": 0,
        }
    ]
    assert report["total"]["requests"] == 5


def test_an_empty_window_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(f"sqlite:{tmp_path / 'usage.db'}")
    assert main(["usage", "--state-dir", str(tmp_path), "--since", "2027-01-01"]) == 0
    assert capsys.readouterr().out == "usage since 2027-01-01 (UTC)\nno usage recorded\n"


def test_a_missing_ledger_is_an_error_and_nothing_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["usage", "--state-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"interlock usage: no usage ledger at {tmp_path / 'usage.db'}\n"
    assert list(tmp_path.iterdir()) == []


def test_without_a_ledger_named_it_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("INTERLOCK_USAGE_URL", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["usage"])
    assert exited.value.code == 2
    assert "say where the ledger is: --usage-url URL, --state-dir DIR or $INTERLOCK_USAGE_URL" in (
        capsys.readouterr().err
    )


DEC_15 = 1797292800.0  # 2026-12-15T00:00:00Z


def test_since_reads_dates_days_and_the_month() -> None:
    assert since_day("month", DEC_15) == "2026-12-01"
    assert since_day("1d", DEC_15) == "2026-12-15"
    assert since_day("7d", DEC_15) == "2026-12-09"
    assert since_day("2026-11-30", DEC_15) == "2026-11-30"
    assert since_day("all", DEC_15) is None
    for bad in ("0d", "2026-13-01", "yesterday"):
        with pytest.raises(
            ValueError, match=rf"^--since '{bad}': use YYYY-MM-DD, Nd \(N >= 1\), month or all$"
        ):
            since_day(bad, DEC_15)


def test_without_postgresql_the_tests_skip_except_where_it_is_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.postgres_server import _missing

    monkeypatch.delenv("INTERLOCK_REQUIRE_POSTGRES", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^no initdb$"):
        _missing("no initdb")
    monkeypatch.setenv("INTERLOCK_REQUIRE_POSTGRES", "1")  # as .ci/run sets it
    with pytest.raises(pytest.fail.Exception, match=r"^PostgreSQL is required here"):
        _missing("no initdb")
