"""Fake upstreams for the adapter tests: each runs in its own thread and event loop for the module;
every test starts with its faults and recorded requests cleared."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.fake_openai import FakeOpenAI
from tests.runtime.upstream.helpers import API_KEY


@pytest.fixture(scope="module")
def _openai_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(name="groq-fake", api_key=API_KEY, strict=True) as fake:
        yield fake


@pytest.fixture
def openai_fake(_openai_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    _openai_server.clear_faults()
    _openai_server.clear_requests()
    yield _openai_server
    _openai_server.clear_faults()


@pytest.fixture(scope="module")
def _ollama_server() -> Iterator[FakeOllama]:
    with FakeOllama(name="gpu0") as fake:
        yield fake


@pytest.fixture
def ollama_fake(_ollama_server: FakeOllama) -> Iterator[FakeOllama]:
    _ollama_server.clear_faults()
    _ollama_server.clear_requests()
    yield _ollama_server
    _ollama_server.clear_faults()
