"""What answers taught survives a restart, is shared by the endpoints on one server and by replicas
(Redis), and ages (issue 38 item 7); what comes back in is checked as an answer is (issue 39)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from interlock.runtime.books.learned import (
    COUNT_HALF_LIFE_S,
    MAX_AGE_S,
    PREFILL_HALF_LIFE_S,
    REPORTING_FLOOR,
    CountBook,
    Learned,
    PrefillBook,
    server_of,
)
from interlock.runtime.books.learned_kept import KeptLearned
from interlock.runtime.state import open_backend
from interlock.runtime.wire.base import Endpoint
from tests.redis_server import RedisServer

NOW = 1_800_000_000.0


class Wall:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def _endpoint(label: str, url: str) -> Endpoint:
    return Endpoint(label, "openai", url, label, {}, 1, 30, 120)


def _learned(wall: Callable[[], float]) -> Learned:
    learned = Learned(CountBook(wall=wall), PrefillBook(wall=wall))
    learned.configure(
        [
            _endpoint("llama", "http://127.0.0.1:8080/v1"),  # an openai worker of the llama-server
            _endpoint("claude-local", "http://127.0.0.1:8080"),  # an anthropic provider, the same server
            _endpoint("other", "http://127.0.0.1:8081/v1"),
        ]
    )
    return learned


def test_the_server_of_an_endpoint_is_its_scheme_host_and_port() -> None:
    assert (
        server_of("http://127.0.0.1:8080/v1") == server_of("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
    )
    assert server_of("https://API.groq.com/openai/v1") == "https://api.groq.com:443"
    assert server_of("http://[::1]:11434") == "http://[::1]:11434"
    assert server_of("http://h:99999") == "http://h:99999"  # not a port: kept as it is, its own server


def test_endpoints_on_one_server_learn_together() -> None:
    """An ``anthropic`` provider and an ``openai`` worker on one llama-server: what one's answer taught,
    the other counts and waits by."""
    learned = _learned(Wall())
    learned.counts.learn("claude-local", "smol", 6_000, 10_000, 3_030)
    learned.prefill.record("claude-local", "smol", 38.8)
    assert learned.counts.prompt("llama", "smol", 6_000, 10_000, REPORTING_FLOOR) == pytest.approx(
        3_030, rel=0.02
    )
    assert learned.prefill.learned("llama", "smol") == pytest.approx(38.8)
    assert learned.prefill.learned("other", "smol") is None
    assert learned.counts.get("other", "smol") is None
    report = learned.report()
    assert report["llama"]["smol"] == report["claude-local"]["smol"]
    assert "other" not in report


def _kept(learned: Learned, folder: Path, shared: Any = None) -> KeptLearned:
    return KeptLearned(learned, lambda: folder / "learned.json", shared)


def test_what_was_learned_is_restored_at_the_next_start(tmp_path: Path) -> None:
    wall = Wall()
    before = _learned(wall)
    before.counts.learn("llama", "smol", 6_000, 10_000, 3_030)
    before.prefill.record("llama", "smol", 38.8)

    async def restart() -> Learned:
        await _kept(before, tmp_path).stop()  # the last write, at shutdown
        after = _learned(wall)
        await _kept(after, tmp_path).start()
        return after

    after = asyncio.run(restart())
    assert after.report() == before.report()
    assert after.counts.prompt("llama", "smol", 6_000, 10_000, REPORTING_FLOOR) == pytest.approx(
        3_030, rel=0.02
    )


def test_nothing_learned_writes_nothing_and_a_missing_or_foreign_file_is_a_first_start(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        learned = _learned(Wall())
        kept = _kept(learned, tmp_path)
        await kept.start()
        await kept.stop()
        assert not (tmp_path / "learned.json").exists()
        for text in ("{not json", '{"kind": "interlock-speeds", "version": 1}', "[]"):
            (tmp_path / "learned.json").write_text(text)
            fresh = _learned(Wall())
            await _kept(fresh, tmp_path).start()
            assert fresh.report() == {}

    asyncio.run(scenario())


def _rows(learned: Learned) -> dict[str, Any]:
    return {"kind": "interlock-learned", "version": 1} | {
        "counts": learned.counts.rows(),
        "prefill": learned.prefill.rows(),
    }


@pytest.mark.parametrize(
    ("book", "field", "value"),
    [
        ("prefill", "tokens_per_s", 1e-300),  # the speed that made a deadline an hour (issue 39 #11)
        ("prefill", "tokens_per_s", "38.8"),
        ("prefill", "at", NOW + 3600),  # from the future
        ("prefill", "at", NOW - MAX_AGE_S - 1),  # too old
        ("counts", "a", [1e300] * 9),
        ("counts", "b", [1.0, 2.0]),
        ("counts", "samples", 0),
        ("counts", "server", 7),
        ("counts", "at", NOW - MAX_AGE_S - 1),
    ],
)
def test_a_kept_row_is_checked_as_an_answer_is(tmp_path: Path, book: str, field: str, value: Any) -> None:
    wall = Wall()
    learned = _learned(wall)
    learned.counts.learn("llama", "smol", 6_000, 10_000, 3_030)
    learned.prefill.record("llama", "smol", 38.8)
    document = _rows(learned)
    document[book][0][field] = value
    (tmp_path / "learned.json").write_bytes(orjson.dumps(document))
    restored = _learned(wall)
    asyncio.run(_kept(restored, tmp_path).start())
    report = restored.report().get("llama", {}).get("smol", {})
    assert ("prompt_counts" in report) is (book != "counts")
    assert ("prompt_tokens_per_s" in report) is (book != "prefill")


def test_a_stale_prompt_speed_weighs_less_against_the_next_answer() -> None:
    wall = Wall()
    fresh, stale = _learned(wall), _learned(wall)
    for book in (fresh, stale):
        book.prefill.record("llama", "smol", 100.0)
    wall.now += 4 * PREFILL_HALF_LIFE_S
    stale.prefill.record("llama", "smol", 40.0)
    wall.now = NOW
    fresh.prefill.record("llama", "smol", 40.0)
    stale_rate, fresh_rate = stale.prefill.learned("llama", "smol"), fresh.prefill.learned("llama", "smol")
    assert stale_rate is not None
    assert fresh_rate is not None
    assert stale_rate < 45 < fresh_rate  # 15/16 the new sample's, against the smoothing's 0.3


def test_a_stale_count_weighs_less_against_the_next_answer() -> None:
    wall = Wall()
    fresh, stale = CountBook(wall=wall), CountBook(wall=wall)
    for book in (fresh, stale):
        book.learn("e", "m", 1000, 0, 2000)
    fresh.learn("e", "m", 1000, 0, 1000)
    wall.now += 4 * COUNT_HALF_LIFE_S
    stale.learn("e", "m", 1000, 0, 1000)
    assert abs(stale.prompt("e", "m", 1000, 0, REPORTING_FLOOR) - 1000) < abs(
        fresh.prompt("e", "m", 1000, 0, REPORTING_FLOOR) - 1000
    )


def test_replicas_share_what_they_learn_through_the_store(redis_server: RedisServer) -> None:
    """Replica a learns; b, started after, has it; b learns something newer, and a takes it at its next
    round; an older row never replaces a newer one."""

    async def scenario() -> None:
        wall = Wall()
        backends = [open_backend(redis_server.url) for _ in range(2)]
        for backend in backends:
            await backend.start()
        try:
            a, b = _learned(wall), _learned(wall)
            kept_a = KeptLearned(a, lambda: None, backends[0].shared_learning())
            kept_b = KeptLearned(b, lambda: None, backends[1].shared_learning())
            await kept_a.start()
            a.counts.learn("llama", "smol", 6_000, 10_000, 3_030)
            a.prefill.record("llama", "smol", 38.8)
            await kept_a.share()
            await kept_b.start()
            assert b.report() == a.report()
            wall.now += 10
            b.prefill.record("claude-local", "smol", 60.0)  # the same server, another endpoint
            await kept_b.share()
            await kept_a.share()
            assert a.prefill.learned("llama", "smol") == b.prefill.learned("llama", "smol")
            assert a.prefill.learned("llama", "smol") != pytest.approx(38.8)
            await kept_a.stop()
            await kept_b.stop()
        finally:
            for backend in backends:
                await backend.close()

    asyncio.run(scenario())
