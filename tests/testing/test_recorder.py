"""The recording proxy (``python -m interlock.testing.recorder``): relays as sent, records no secret."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.recorder import REMOVED

KEY = "sk-recorded-SECRET-51af"
HI = {"model": "gpt-fake", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def upstream() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(name="up", api_key=KEY).start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def recorder(upstream: FakeOpenAI, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    out = tmp_path / "requests.jsonl"
    command = [sys.executable, "-m", "interlock.testing.recorder", "--target", upstream.url]
    command += ["--out", str(out), "--client", "test-client", "--port", "0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url, out
    finally:
        proc.terminate()
        proc.wait(10)
        assert proc.stdout is not None
        proc.stdout.close()


def test_a_request_is_relayed_and_recorded_without_its_key(
    recorder: tuple[str, Path], upstream: FakeOpenAI
) -> None:
    url, out = recorder
    headers = {"Authorization": f"Bearer {KEY}", "X-Client": "kept"}
    response = httpx.post(f"{url}/v1/chat/completions?x=1", json=HI, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Hello from up, model gpt-fake."
    assert upstream.requests[-1].headers["authorization"] == f"Bearer {KEY}"  # relayed as sent
    (record,) = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert record["client"] == "test-client"
    assert (record["method"], record["path"], record["query"]) == ("POST", "/v1/chat/completions", "x=1")
    assert record["body"] == HI
    assert record["headers"]["Authorization"] == REMOVED
    assert record["headers"]["X-Client"] == "kept"
    assert {"host", "content-length"}.isdisjoint(name.lower() for name in record["headers"])
    assert record["interlock_answered"]["status"] == 200
    assert KEY not in out.read_text()


def test_a_stream_comes_through_whole(recorder: tuple[str, Path]) -> None:
    url, out = recorder
    with httpx.stream(
        "POST",
        f"{url}/v1/chat/completions",
        json={**HI, "stream": True},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=30,
    ) as response:
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    assert orjson.loads(out.read_bytes())["interlock_answered"]["body_start"].startswith("data: ")


def test_a_request_without_a_json_body_is_relayed_but_not_recorded(recorder: tuple[str, Path]) -> None:
    url, out = recorder
    auth = {"Authorization": f"Bearer {KEY}"}
    assert httpx.get(f"{url}/v1/models", headers=auth, timeout=30).status_code == 200
    broken = httpx.post(f"{url}/v1/chat/completions", content=b'{"model": ', headers=auth, timeout=30)
    assert broken.status_code == 400  # the upstream's own answer to it, relayed
    assert not out.exists()
