"""Streams that fall silent, through a real `interlock serve`: a stall after the first content ends at the
provider's `idle` timeout with the surface's error event and counts against the circuit."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.e2e.harness import Served, compile_to

CONFIG = """\
version: 1
server: {{alias_namespace: st/, direct_models: allow}}
providers:
  stally:
    kind: openai
    base_url: "{stally}/v1"
    probe: false
    timeouts: {{connect: 1s, first_byte: 5s, idle: 500ms, total: 60s}}
  rescue:
    kind: openai
    base_url: "{rescue}/v1"
    probe: false
    timeouts: {{connect: 1s, first_byte: 5s, total: 60s}}
health: {{failure_threshold: 2, open_for: 60s}}
aliases:
  st/idle: {{chain: [stally/s-idle, rescue/r-idle]}}
  st/idle-messages: {{chain: [stally/s-idle-messages, rescue/r-idle-messages]}}
"""

HI = [{"role": "user", "content": "one two three four five"}]


@dataclass
class Rig:
    gateway: Served
    stally: FakeOpenAI
    rescue: FakeOpenAI


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    folder: Path = tmp_path_factory.mktemp("stalls")
    with FakeOpenAI(name="stally") as stally, FakeOpenAI(name="rescue") as rescue:
        text = CONFIG.format(stally=stally.url, rescue=rescue.url)
        plan = compile_to(folder / "config.yaml", text, folder / "plan.json")
        gateway = Served(plan, {}, folder / "gateway.log")
        try:
            yield Rig(gateway, stally, rescue)
        finally:
            gateway.stop()


def test_a_stream_that_stalls_after_its_first_content_ends_at_idle_with_the_error_event(rig: Rig) -> None:
    gateway = rig.gateway
    rig.stally.set_fault(Fault.stall(after_chunks=2), model="s-idle")  # silent until the gateway gives up
    before = gateway.metric("interlock_stream_aborted_total", reason="idle_timeout")
    body = {"model": "st/idle", "messages": HI, "stream": True}
    with gateway.http.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["x-interlock-resolved"] == "stally/s-idle"
        events = [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]
    assert "[DONE]" not in events  # never the success terminator
    assert [orjson.loads(e)["model"] for e in events[:2]] == ["stally/s-idle", "stally/s-idle"]
    assert orjson.loads(events[-1]) == {
        "error": {
            "message": "the stream from stally/s-idle broke after it had started (idle_timeout); "
            "the answer is incomplete",
            "type": "server_error",
            "param": None,
            "code": "stream_aborted",
        }
    }
    assert gateway.metric("interlock_stream_aborted_total", reason="idle_timeout") == before + 1
    health = gateway.health()
    assert health["candidates"]["stally/s-idle"]["consecutive_failures"] == 1  # towards the circuit
    assert health["candidates"]["stally/s-idle"]["last_error_class"] == "idle_timeout"
    assert health["providers"]["stally"]["timeouts"] == {
        "connect_s": 1.0,
        "first_byte_s": 5.0,
        "idle_s": 0.5,
        "total_s": 60.0,
    }
    assert health["providers"]["rescue"]["timeouts"]["idle_s"] == 120.0  # unset: the kind's own


def test_a_stalled_messages_stream_ends_with_its_error_event_not_message_stop(rig: Rig) -> None:
    rig.stally.set_fault(Fault.stall(after_chunks=2), model="s-idle-messages")
    body = {"model": "st/idle-messages", "max_tokens": 64, "messages": HI, "stream": True}
    with rig.gateway.http.stream("POST", "/v1/messages", json=body) as response:
        assert response.status_code == 200
        kinds = [line[len("event: ") :] for line in response.iter_lines() if line.startswith("event: ")]
    assert kinds[0] == "message_start"
    assert kinds[-1] == "error"
    assert "message_stop" not in kinds
