"""Stream ends that tell the truth (issue 22): a stream is complete only with its format's finish reason.

Each fake upstream reproduces the ways a real server ended a stream without finishing it: the role chunk
and then ``[DONE]`` (llama.cpp's server, when a second request took its only slot), an empty 200 body,
and chunks with text that end on the terminator but no finish reason. Before anything was said the
adapter raises from ``chat_stream`` (the router can still fall back); after, the stream raises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from interlock.common.kinds import KINDS
from interlock.runtime.base.errors import ProtocolFailure
from interlock.runtime.wire.base import Endpoint
from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.fake_server import FakeServer
from interlock.testing.faults import Fault

from .helpers import endpoint, stream, text_of

HI = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
KINDS_UNDER_TEST = ("openai", "ollama", "anthropic")
MODEL = "llama3.2:3b"  # one the fake Ollama has; the other fakes take any name


@pytest.fixture(scope="module", params=KINDS_UNDER_TEST)
def fake(request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeServer]]:
    kind: str = request.param
    server: FakeServer = {"openai": FakeOpenAI, "ollama": FakeOllama, "anthropic": FakeAnthropic}[kind]()
    with server:
        yield kind, server


@pytest.fixture
def upstream(fake: tuple[str, FakeServer]) -> Iterator[tuple[Endpoint, FakeServer]]:
    kind, server = fake
    server.clear_faults()
    url = f"{server.url}/v1" if kind == "openai" else server.url
    ep = endpoint(kind, url, key=None)
    if kind == "anthropic":
        ep = dataclasses.replace(ep, headers=dict(KINDS["anthropic"].fixed_headers))
    yield ep, server
    server.clear_faults()


def test_a_whole_stream_ends_well(upstream: tuple[Endpoint, FakeServer]) -> None:
    ep, _ = upstream
    chunks, error = stream(ep, MODEL, HI)
    assert error is None
    assert text_of(chunks).startswith("Hello from")
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_the_role_chunk_and_then_the_terminator_fails_before_the_first_chunk(
    upstream: tuple[Endpoint, FakeServer],
) -> None:
    ep, server = upstream
    server.set_fault(Fault.unfinished(after_chunks=1))
    if ep.kind == "ollama":  # no role-only line there: its first line already carries text
        chunks, error = stream(ep, MODEL, HI)
        assert text_of(chunks)
        assert isinstance(error, ProtocolFailure)
        return
    with pytest.raises(ProtocolFailure):
        stream(ep, MODEL, HI)


def test_an_empty_200_stream_fails_before_the_first_chunk(upstream: tuple[Endpoint, FakeServer]) -> None:
    ep, server = upstream
    server.set_fault(Fault.empty_stream())
    with pytest.raises(ProtocolFailure, match=r"^stream ended before"):
        stream(ep, MODEL, HI)


def test_text_that_ends_on_the_terminator_without_a_finish_reason_is_cut(
    upstream: tuple[Endpoint, FakeServer],
) -> None:
    ep, server = upstream
    server.set_fault(Fault.unfinished(after_chunks=3))
    chunks, error = stream(ep, MODEL, HI)
    assert text_of(chunks)  # what was said arrives, then the failure: never a success
    assert not any(c["choices"] and c["choices"][0].get("finish_reason") for c in chunks)
    assert isinstance(error, ProtocolFailure)
