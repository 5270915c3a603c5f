"""``ChatStream.read``: the chunks of one upstream read at once (the relay writes them as one piece),
the same chunks as iterating, and an error only after the chunks that arrived before it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from interlock.runtime.errors import ServerError, UpstreamError
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.wire.base import Endpoint
from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault

from .helpers import _with_adapter, endpoint, run, stream

HI = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}
CHAT_MODEL = "llama3.2:3b"  # one the Ollama fake serves
USAGE = {**HI, "stream_options": {"include_usage": True}}

Batches = list[list[dict[str, Any]]]


def reads(ep: Endpoint, model: str, body: Mapping[str, Any]) -> tuple[Batches, UpstreamError | None]:
    """What each ``read`` gave until an empty one, and the error that ended the stream (if any)."""

    async def go(adapter: Adapter) -> tuple[Batches, UpstreamError | None]:
        batches: Batches = []
        upstream = await adapter.chat_stream(ep, model, body)
        try:
            while chunks := await upstream.read():
                batches.append(list(chunks))
        except UpstreamError as exc:
            return batches, exc
        finally:
            await upstream.aclose()
        assert list(await upstream.read()) == []  # and stays over
        return batches, None

    result: tuple[Batches, UpstreamError | None] = run(_with_adapter(ep.kind, go))
    return result


@pytest.mark.parametrize("kind", ["openai", "ollama"])
def test_a_burst_arrives_in_one_read_with_the_chunks_iterating_gives(
    kind: str, openai_fake: FakeOpenAI, ollama_fake: FakeOllama
) -> None:
    ep = endpoint(kind, openai_fake.base_url if kind == "openai" else ollama_fake.url)
    model = "m1" if kind == "openai" else CHAT_MODEL
    batches, error = reads(ep, model, USAGE)
    iterated, _ = stream(ep, model, USAGE)
    assert error is None
    read = [chunk for chunks in batches for chunk in chunks]
    for chunks in (read, iterated):
        for chunk in chunks:
            chunk.pop("created", None)
            chunk.pop("id", None)
    assert read == iterated
    assert iterated[-1]["usage"]["completion_tokens"] > 0  # the usage chunk is there, last
    # the fake writes the whole answer at once (as a fast upstream's burst): far fewer reads than chunks
    assert len(batches) < len(iterated)


def test_an_error_event_comes_after_the_chunks_read_before_it(openai_fake: FakeOpenAI) -> None:
    openai_fake.set_fault(Fault.stream_error("model crashed", after_chunks=3))
    batches, error = reads(endpoint("openai", openai_fake.base_url), "m1", HI)
    assert sum(len(chunks) for chunks in batches) == 3
    assert isinstance(error, ServerError)
    assert error.message == "upstream reported an error in its response"
