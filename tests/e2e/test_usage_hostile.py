"""A hostile upstream's usage numbers under a real ``interlock serve`` (issue 39, item 1).

An upstream claims ``prompt_tokens`` 2^64 - 1 in one answer and 2^63 - 1 in two more: the gateway cuts
each count to its bound where it enters (``interlock_upstream_usage_clamped_total``), so the ledger keeps
committing every other tenant's debits, ``/v1/health`` answers 200, ``interlock status`` exits 0 and the
callers' tokens per minute stay shared through Redis (its script never sees an absurd number). Run on
SQLite and on a real PostgreSQL, with a real Redis. Before the bound, SQLite raised ``OverflowError`` in
a loop that never backed off, PostgreSQL retried the poisoned batch forever, and ``/v1/health`` was 500.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import openai
import pytest

from interlock.cli import main
from interlock.runtime.usage.metering import MAX_REPORTED_TOKENS
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.replies import Reply
from tests.e2e.harness import Served
from tests.postgres_server import PostgresServer
from tests.redis_server import RedisServer
from tests.waiting import wait_until

CONFIG = """\
version: 1
server: {{default_alias: h/good, alias_namespace: h/, auth: required}}
providers:
  cloud: {{kind: openai, base_url: "{cloud}/v1", timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}}}
  huge: {{kind: openai, base_url: "{huge}/v1", timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}}}
  big: {{kind: openai, base_url: "{big}/v1", timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}}}
aliases:
  h/good: {{description: an honest upstream, chain: [cloud/gpt-4o-mini]}}
  h/huge: {{description: claims 2^64 - 1 prompt tokens, chain: [huge/evil]}}
  h/big: {{description: claims 2^63 - 1 prompt tokens, chain: [big/evil]}}
tenants:
  evil: {{}}
  good: {{}}
keys:
  evil-key: {{tenant: evil, key_env: EVIL_KEY, tokens_per_minute: 1000000000000}}
  good-key: {{tenant: good, key_env: GOOD_KEY, tokens_per_minute: 1000000}}
"""
ENV = {"EVIL_KEY": "sk-evil-41c9-SECRET", "GOOD_KEY": "sk-good-7d2e-SECRET"}
HI = [{"role": "user", "content": "hello there"}]
Rows = Callable[[], dict[str, int]]


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[FakeOpenAI, FakeOpenAI, FakeOpenAI]]:
    with (
        FakeOpenAI(name="cloud") as cloud,
        FakeOpenAI(name="huge", reply=Reply(claims={"prompt_tokens": 2**64 - 1})) as huge,
        FakeOpenAI(name="big", reply=Reply(claims={"prompt_tokens": 2**63 - 1})) as big,
    ):
        yield cloud, huge, big


def _requests_per_tenant(rows: list[tuple[object, ...]]) -> dict[str, int]:
    return {str(tenant): int(requests) for tenant, requests in rows}  # type: ignore[call-overload]


SQL = "SELECT tenant, SUM(requests) FROM interlock_usage GROUP BY tenant"


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], Rows]:
    if request.param == "sqlite":
        path = tmp_path / "usage.db"

        def read_sqlite() -> dict[str, int]:
            if not path.exists():
                return {}
            with sqlite3.connect(path) as db:
                return _requests_per_tenant(db.execute(SQL).fetchall())

        return ["--usage-url", f"sqlite:{path}"], read_sqlite
    import psycopg

    url = request.getfixturevalue("postgres_server").new_database()
    assert isinstance(request.getfixturevalue("postgres_server"), PostgresServer)

    def read_postgres() -> dict[str, int]:
        with psycopg.connect(url) as db:
            return _requests_per_tenant(db.execute(SQL).fetchall())

    return ["--usage-url", url], read_postgres


def test_a_hostile_upstreams_usage_is_cut_and_every_other_tenant_keeps_being_counted(
    upstreams: tuple[FakeOpenAI, FakeOpenAI, FakeOpenAI],
    store: tuple[list[str], Rows],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cloud, huge, big = upstreams
    flags, committed = store
    config = tmp_path / "interlock.yaml"
    config.write_text(CONFIG.format(cloud=cloud.url, huge=huge.url, big=big.url))
    redis = RedisServer(tmp_path).start()
    gateway = Served(
        config, ENV, tmp_path / "serve.log", *flags, "--state-url", redis.url, "--usage-flush-ms", "50"
    )
    try:
        evil = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=ENV["EVIL_KEY"], max_retries=0)
        good = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=ENV["GOOD_KEY"], max_retries=0)
        assert evil.chat.completions.create(model="h/huge", messages=HI).usage is not None
        for _ in range(2):  # two of 2^63 - 1 overflow a 64-bit sum
            evil.chat.completions.create(model="h/big", messages=HI)
        stream = evil.chat.completions.create(model="h/huge", messages=HI, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        for _ in range(5):
            good.chat.completions.create(model="h/good", messages=HI)
        wait_until(lambda: committed() == {"evil": 4, "good": 5}, 30, "every debit to be committed")
        assert gateway.metric("interlock_upstream_usage_clamped_total", candidate="huge/evil") == 2
        assert gateway.metric("interlock_upstream_usage_clamped_total", candidate="big/evil") == 2
        assert gateway.metric("interlock_usage_store_failures_total") == 0
        auth = {"Authorization": f"Bearer {ENV['GOOD_KEY']}"}
        health = gateway.http.get("/v1/health", headers=auth)
        assert health.status_code == 200
        usage = health.json()["usage"]
        assert (usage["failures"], usage["last_error"], usage["waiting_debits"]) == (0, None, 0)
        assert health.json()["slot_state"]["degraded"] is False  # Redis's scripts took every count
        good.chat.completions.create(model="h/good", messages=HI)  # still counted afterwards
        wait_until(lambda: committed() == {"evil": 4, "good": 6}, 30, "the next debit to be committed")
        monkeypatch.setenv("STATUS_KEY", ENV["GOOD_KEY"])
        assert main(["status", "--url", gateway.url, "--api-key-env", "STATUS_KEY"]) == 0
        assert httpx.get(f"{gateway.url}/v1/health", headers=auth, timeout=10).status_code == 200
    finally:
        gateway.stop()
        redis.stop()
    assert "Traceback" not in gateway.log()
    assert MAX_REPORTED_TOKENS < 2**32  # a month of cut answers stays far inside a 64-bit column
