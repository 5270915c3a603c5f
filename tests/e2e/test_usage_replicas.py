"""The usage ledger shared by several processes: two replicas on one real PostgreSQL see each other's
debits (a budget spent on one is refused on the other after its next refresh), and the workers of
``--workers 2`` write one SQLite file together without losing a count."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from interlock.testing.fake_openai import FakeOpenAI
from tests.e2e.harness import Served
from tests.postgres_server import PostgresServer
from tests.waiting import wait_until

CONFIG = """\
version: 1
server: {{default_alias: r/chat, alias_namespace: r/, auth: required}}
providers:
  cloud: {{kind: openai, base_url: "{cloud}/v1", timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}}}
aliases:
  r/chat: {{description: chat, chain: [cloud/gpt-4o-mini]}}
tenants:
  lab: {{}}
keys:
  lab-key: {{tenant: lab, key_env: LAB_KEY, credits: 40}}
  other: {{tenant: lab, key_env: OTHER_KEY}}
"""
ENV = {"LAB_KEY": "sk-lab-5e1f0b93c2d7", "OTHER_KEY": "sk-other-77a0c4e18f"}  # 16+: a secret
HI = [{"role": "user", "content": "hello there, how are you"}]


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with FakeOpenAI(name="cloud") as cloud:
        path = tmp_path_factory.mktemp("replicas") / "interlock.yaml"
        path.write_text(CONFIG.format(cloud=cloud.url))
        yield path


def chat(gateway: Served, key: str) -> httpx.Response:
    return gateway.http.post(
        "/v1/chat/completions",
        headers={"authorization": f"Bearer {ENV[key]}"},
        json={"model": "r/chat", "messages": HI},
    )


def test_a_budget_spent_on_one_replica_is_refused_on_the_other(
    config: Path, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = postgres_server.new_database()
    flags = ("--usage-url", url, "--usage-flush-ms", "50", "--usage-refresh-ms", "200")
    one = Served(config, ENV, tmp_path / "one.log", *flags)
    two = Served(config, ENV, tmp_path / "two.log", *flags)
    try:
        client = openai.OpenAI(base_url=f"{one.url}/v1", api_key=ENV["LAB_KEY"], max_retries=0)
        statuses = []
        for _ in range(10):
            try:
                client.chat.completions.create(model="r/chat", messages=HI)
                statuses.append(200)
            except openai.APIStatusError as exc:
                statuses.append(exc.status_code)
                break
        assert statuses[-1] == 402
        # the other replica learns of it from PostgreSQL at its next refresh (every 200 ms here)
        wait_until(lambda: chat(two, "LAB_KEY").status_code == 402, 60, "the other replica to refuse")
        assert chat(two, "OTHER_KEY").status_code == 200  # a key without credits: never refused
    finally:
        one.stop()
        two.stop()


def test_the_workers_of_one_host_share_the_sqlite_file(config: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    gateway = Served(config, ENV, tmp_path / "serve.log", "--workers", "2", "--state-dir", str(state))
    try:
        for _ in range(20):
            assert chat(gateway, "OTHER_KEY").status_code == 200
    finally:
        gateway.stop()  # SIGTERM: every worker commits what it has
    with sqlite3.connect(state / "usage.db") as db:
        (requests,) = db.execute("SELECT SUM(requests) FROM interlock_usage").fetchone()
    assert requests == 20


def test_what_replicas_admit_before_they_see_each_others_debits_is_at_most_a_budget_each(
    config: Path, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """The bound of the ledger's lag, at its worst: two replicas sharing PostgreSQL and Redis, whose
    refresh never comes in this test. Requests one after the other, alternating: reservations are
    released when each ends, and neither replica sees the other's debits, so each spends the budget
    on its own view, never more (each answer is cut to what that view leaves): at most 2 x 40."""
    from tests.redis_server import RedisServer

    redis = RedisServer(tmp_path).start()
    url = postgres_server.new_database()
    flags = ("--usage-url", url, "--usage-flush-ms", "50", "--usage-refresh-ms", "600000")
    flags += ("--state-url", redis.url)
    one = Served(config, ENV, tmp_path / "one.log", *flags)
    two = Served(config, ENV, tmp_path / "two.log", *flags)
    try:
        import redis as redis_client

        holds = redis_client.Redis.from_url(redis.url)
        refused: set[int] = set()
        admitted = 0
        for n in range(40):
            if len(refused) == 2:
                break
            if n % 2 in refused:
                continue
            # a hold is given back after the answer is sent: the next request, on the other replica,
            # must not find the last one's hold still in Redis (under load it can), or it is refused
            # for a hold, not for the debits this test is about
            wait_until(
                lambda: not holds.keys("*:q:*"), 30, "the last request's credits hold to be given back"
            )
            answer = chat((one, two)[n % 2], "LAB_KEY")
            assert answer.status_code in (200, 402), answer.text
            if answer.status_code == 402:
                refused.add(n % 2)
            else:
                admitted += 1
        assert refused == {0, 1}

        def committed() -> tuple[int, int]:
            import psycopg

            with psycopg.connect(url) as db:
                sql = "SELECT SUM(requests), SUM(prompt_tokens + completion_tokens) FROM interlock_usage"
                row = db.execute(sql).fetchone()
            return (int(row[0] or 0), int(row[1] or 0)) if row is not None else (0, 0)

        wait_until(lambda: committed()[0] == admitted, 30, "both replicas' debits to be committed")
        assert 40 < committed()[1] <= 2 * 40, (admitted, committed())
    finally:
        one.stop()
        two.stop()
        redis.stop()
