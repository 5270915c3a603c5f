"""The two one-line switches for debugging (issue 41): ``INTERLOCK_SERVER=uvicorn`` serves client
connections on uvicorn's own protocol and ``INTERLOCK_TRANSPORT=httpx`` sends upstream requests with
plain httpx; a gateway on both answers a chat and a stream as the own stack does (the borders:
``net/connections.py::SERVERS``, ``net/transport.py::TRANSPORTS``)."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from tests.e2e.conftest import ENV, Fakes
from tests.e2e.harness import Served

HI = [{"role": "user", "content": "one two three four five"}]


@pytest.fixture(scope="module")
def plain(fakes: Fakes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("plain-stack")
    config = folder / "interlock.yaml"
    config.write_text(fakes.config())
    env = {**ENV, "INTERLOCK_SERVER": "uvicorn", "INTERLOCK_TRANSPORT": "httpx"}
    served = Served(config, env, folder / "serve.log")
    try:
        yield served
    finally:
        served.stop()


def test_the_plain_stack_answers_a_chat_and_a_stream(plain: Served) -> None:
    answer = plain.http.post("/v1/chat/completions", json={"model": "e2e/default", "messages": HI})
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "Hello from box, model llama3.2:3b."
    body = {"model": "e2e/default", "messages": HI, "stream": True}
    with plain.http.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        events = [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello from box, model llama3.2:3b."
    log = plain.log()
    assert "INTERLOCK_SERVER=uvicorn: client connections run on uvicorn's own protocol" in log
    assert "INTERLOCK_TRANSPORT=httpx: upstream requests go through httpx" in log
