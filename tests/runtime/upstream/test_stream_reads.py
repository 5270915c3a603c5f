"""``ChatStream.read``: the chunks of one upstream read at once (the relay writes them as one piece),
the same chunks as iterating, and an error only after the chunks that arrived before it; ``relay``: the
same chunks handed to a callback as they arrive, the upstream not read while that callback is full."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from interlock.runtime.base.errors import IdleTimeout, ServerError, TotalTimeout, UpstreamError
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.upstream.exchange import LineStream
from interlock.runtime.wire import anthropic, ollama, openai_chat, openai_responses
from interlock.runtime.wire.base import ChatStream, Endpoint
from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from interlock.testing.replies import Reply
from tests.waiting import until, wait_until

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


# -- relay: the chunks handed to a callback in the connection's read callback ----------------------


async def relayed(
    upstream: ChatStream, full_after: int | None = None, gate: asyncio.Event | None = None
) -> tuple[Batches, list[bool]]:
    """Every batch ``relay`` handed over; with ``full_after``, the sink says "full" on that batch and
    ``drain`` waits for ``gate``, noting meanwhile whether the upstream connection was still read."""
    batches: Batches = []
    reading_while_full: list[bool] = []

    def sink(chunks: Sequence[dict[str, Any]]) -> bool:
        batches.append(list(chunks))
        return full_after is not None and len(batches) == full_after

    async def drain() -> None:
        assert isinstance(upstream, LineStream)
        conn = upstream._response.conn  # the upstream connection, paused by the relay while full
        reading_while_full.append(
            conn is not None and conn.transport is not None and conn.transport.is_reading()
        )
        assert gate is not None
        await gate.wait()

    await upstream.relay(sink, drain)
    return batches, reading_while_full


def plain(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in chunk.items() if k not in ("created", "id")} for chunk in chunks]


@pytest.mark.parametrize("kind", ["openai", "ollama"])
def test_relay_hands_over_what_iterating_gives_a_chunk_at_a_time(kind: str) -> None:
    reply = Reply(text="one two three four five six", chunk_delay_s=0.01)
    with FakeOpenAI(reply=reply) as openai, FakeOllama(reply=reply) as ollama:
        ep = endpoint(kind, openai.base_url if kind == "openai" else ollama.url, key=None)
        model = "m1" if kind == "openai" else CHAT_MODEL

        async def go(adapter: Adapter) -> Batches:
            upstream = await adapter.chat_stream(ep, model, USAGE)
            try:
                batches, _ = await relayed(upstream)
            finally:
                await upstream.aclose()
            assert list(await upstream.read()) == []  # and stays over
            return batches

        batches: Batches = run(_with_adapter(kind, go))
        iterated, _ = stream(ep, model, USAGE)
    assert plain([chunk for chunks in batches for chunk in chunks]) == plain(iterated)
    assert len(batches) > 3  # trickled: handed over as they came, not in one piece at the end


def test_a_full_sink_stops_the_upstream_reads_until_it_drains() -> None:
    with FakeOpenAI(reply=Reply(text="one two three four five six", chunk_delay_s=0.01)) as fake:
        ep = endpoint("openai", fake.base_url, key=None)

        async def go(adapter: Adapter) -> tuple[Batches, list[bool]]:
            gate = asyncio.Event()
            upstream = await adapter.chat_stream(ep, "m1", HI)
            try:
                relay = asyncio.create_task(relayed(upstream, full_after=2, gate=gate))
                await until(lambda: fake.streams.finished == 1, "the fake to write its whole stream")
                assert not relay.done()  # still draining: the rest was not handed over meanwhile
                gate.set()
                return await relay
            finally:
                await upstream.aclose()

        batches, reading = run(_with_adapter("openai", go))
        iterated, _ = stream(ep, "m1", HI)
    assert reading == [False]  # the connection was not read while the sink was full
    assert plain([chunk for chunks in batches for chunk in chunks]) == plain(iterated)


def test_relay_raises_an_error_event_after_the_chunks_before_it(openai_fake: FakeOpenAI) -> None:
    openai_fake.set_fault(Fault.stream_error("model crashed", after_chunks=3))

    async def go(adapter: Adapter) -> tuple[Batches, UpstreamError]:
        batches: Batches = []
        upstream = await adapter.chat_stream(endpoint("openai", openai_fake.base_url), "m1", HI)
        try:
            with pytest.raises(UpstreamError) as info:
                await upstream.relay(lambda chunks: bool(batches.append(list(chunks))), asyncio.sleep)
        finally:
            await upstream.aclose()
        return batches, info.value

    batches, error = run(_with_adapter("openai", go))
    assert sum(len(chunks) for chunks in batches) == 3
    assert isinstance(error, ServerError)


def test_the_total_deadline_ends_a_relay_that_waits() -> None:
    words = " ".join(["word"] * 600)  # 90 s of chunks: the 1 s deadline falls well inside the stream
    with FakeOpenAI(reply=Reply(text=words, chunk_delay_s=0.15)) as fake:
        ep = endpoint("openai", fake.base_url, key=None, first_byte_s=1, total_s=1)

        async def go(adapter: Adapter) -> tuple[int, UpstreamError]:
            count = 0

            def sink(chunks: Sequence[dict[str, Any]]) -> bool:
                nonlocal count
                count += len(chunks)
                return False

            upstream = await adapter.chat_stream(ep, "m1", HI)
            try:
                with pytest.raises(TotalTimeout) as info:
                    await upstream.relay(sink, asyncio.sleep)
            finally:
                await upstream.aclose()
            return count, info.value

        count, error = run(_with_adapter("openai", go))
    assert error.message == "exchange exceeded 1 s"
    assert 1 <= count < 600


def _count_relayed(adapter: Adapter, ep: Endpoint, model: str) -> Any:
    """Relay a stream from ``adapter`` to a sink that counts chunks; (count, the error or None)."""

    async def go() -> tuple[int, UpstreamError | None]:
        count = 0

        def sink(chunks: Sequence[dict[str, Any]]) -> bool:
            nonlocal count
            count += len(chunks)
            return False

        upstream = await adapter.chat_stream(ep, model, HI)
        try:
            await upstream.relay(sink, asyncio.sleep)
        except UpstreamError as exc:
            return count, exc
        finally:
            await upstream.aclose()
        return count, None

    return go()


@pytest.mark.parametrize("kind", ["openai", "ollama"])
def test_the_idle_deadline_ends_a_stream_that_stalls_after_its_first_chunks(kind: str) -> None:
    """A stream that falls silent with its connection open: ended at `idle`, long before `total`."""
    stall = Fault.stall(after_chunks=3)  # silent until the client closes
    with FakeOpenAI() as openai, FakeOllama() as ollama:
        fake = openai if kind == "openai" else ollama
        fake.set_fault(stall)
        ep = endpoint(kind, openai.base_url if kind == "openai" else ollama.url, idle_s=0.2, total_s=120)
        model = "m1" if kind == "openai" else CHAT_MODEL
        count, error = run(_with_adapter(kind, lambda adapter: _count_relayed(adapter, ep, model)))
        wait_until(lambda: fake.streams.cut == 1, 10, "the fake to see its stream closed")
    assert isinstance(error, IdleTimeout)
    assert error.message == "the stream said nothing for 0.2 s"
    assert error.error_class == "idle_timeout"
    assert 1 <= count <= 3


def test_a_stream_longer_than_idle_whose_pauses_are_shorter_is_whole() -> None:
    """The idle deadline moves with every read: a stream lasting several `idle`s, each pause shorter
    (50 ms chunks, a 1 s `idle`), is answered whole."""
    words = " ".join(["word"] * 60)  # about 3 s of chunks
    with FakeOpenAI(reply=Reply(text=words, chunk_delay_s=0.05)) as fake:
        ep = endpoint("openai", fake.base_url, key=None, idle_s=1, total_s=60)
        count, error = run(_with_adapter("openai", lambda adapter: _count_relayed(adapter, ep, "m1")))
    assert error is None
    assert count >= 60


def test_a_reader_that_holds_the_stream_back_is_not_an_idle_upstream() -> None:
    """The caller reads slowly (the sink is full): the upstream is not read, and its silence meanwhile
    is the gateway's own: no idle timeout, however long the caller takes."""
    with FakeOpenAI(reply=Reply(text="one two three four five six", chunk_delay_s=0.01)) as fake:
        ep = endpoint("openai", fake.base_url, key=None, idle_s=0.1, total_s=60)

        async def go(adapter: Adapter) -> tuple[Batches, list[bool]]:
            gate = asyncio.Event()
            upstream = await adapter.chat_stream(ep, "m1", HI)
            try:
                relay = asyncio.create_task(relayed(upstream, full_after=2, gate=gate))
                await until(lambda: fake.streams.finished == 1, "the fake to write its whole stream")
                await asyncio.sleep(0.5)  # five idle deadlines while the caller is full
                assert not relay.done()
                gate.set()
                return await relay
            finally:
                await upstream.aclose()

        batches, _ = run(_with_adapter("openai", go))
        iterated, _ = stream(ep, "m1", HI)
    assert plain([chunk for chunks in batches for chunk in chunks]) == plain(iterated)


# -- whole: a read that is one whole event, decoded in one step --------------------------------------

CHUNK = b'{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}'
LAST = b'{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
TEXT = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}'
SSE_READS = {  # read -> whether it is one whole event
    b"data: " + CHUNK + b"\n\n": True,
    b"data:" + CHUNK + b"\n\n": True,
    b"data: " + LAST + b"\n\n": True,
    b"data: [DONE]\n\n": True,
    b'data: {"error":{"message":"overloaded","type":"server_error"}}\n\n': True,
    b"data: [1]\n\n": True,
    b"data: {\n\n": True,
    b"event: content_block_delta\ndata: " + TEXT + b"\n\n": True,
    b"event: content_block_delta\r\ndata: " + TEXT + b"\n\n": True,
    b"data: " + CHUNK + b"\r\n\r\n": False,
    b"data: " + CHUNK + b"\r\n\n": False,
    b"data: " + CHUNK + b"\n\ndata: " + LAST + b"\n\n": False,
    b"data: " + CHUNK + b"\n": False,
    b"data: " + CHUNK: False,
    b": keep-alive\n\n": False,
    b"event: ping\n\n": False,
    b"id: 7\ndata: " + CHUNK + b"\n\n": False,
    b"\n": False,
}
NDJSON_READS = {
    b'{"model":"m","message":{"role":"assistant","content":"hi"},"done":false}\n': True,
    b'{"model":"m","message":{"content":""},"done":true,"done_reason":"stop"}\n': True,
    b'{"error":"model not found"}\n': True,
    b"\n": True,
    b'{"model":"m","done":false}\n{"model":"m","done":false}\n': False,
    b'{"model":"m","done":false}': False,
}


def decoders(kind: str) -> list[Any]:
    """Two fresh decoders of ``kind``'s stream (one decodes whole reads, the other line by line)."""
    ep = endpoint("openai", "http://127.0.0.1:9/v1")
    make = {
        "openai": lambda: openai_chat.SSEDecoder(ep),
        "anthropic": lambda: anthropic.EventDecoder("m", ep, True),
        "anthropic relay": lambda: anthropic.EventDecoder("m", ep, True, relay=True),
        "responses": lambda: openai_responses.EventDecoder("m", ep),
        "ollama": lambda: ollama.NDJSONDecoder("m", True, {}),
        "ollama relay": lambda: ollama.NDJSONDecoder("m", True, {}, relay=True),
    }[kind]
    return [make(), make()]


def decoded(decoder: Any, read: bytes, whole: bool) -> tuple[list[Any], str | None, bool]:
    """What ``decoder`` made of ``read`` (``whole``: through ``whole``, else line by line, as
    ``LineStream`` feeds lines), the error it raised, whether it says it is done."""
    out: deque[dict[str, Any]] = deque()
    error = None
    try:
        if whole:
            assert decoder.whole(read, out)
        else:
            for line in read.split(b"\n")[:-1]:
                decoder.feed(line, out)
    except UpstreamError as exc:
        error = f"{type(exc).__name__}: {exc}"
    seen = [(plain([chunk])[0], getattr(chunk, "native", None), getattr(chunk, "raw", None)) for chunk in out]
    return seen, error, decoder.done


@pytest.mark.parametrize(
    ("kind", "reads"),
    [
        ("openai", SSE_READS),
        ("anthropic", SSE_READS),
        ("anthropic relay", SSE_READS),
        ("responses", SSE_READS),
        ("ollama", NDJSON_READS),
        ("ollama relay", NDJSON_READS),
    ],
)
def test_a_whole_event_in_one_read_decodes_as_its_lines_do(kind: str, reads: dict[bytes, bool]) -> None:
    for read, whole in reads.items():
        one, other = decoders(kind)
        if not whole:  # anything else is left to the lines: nothing done, nothing kept
            out: deque[dict[str, Any]] = deque()
            assert not one.whole(read, out), read
            assert not out
            assert decoded(one, read, False) == decoded(other, read, False), read
            continue
        assert decoded(one, read, True) == decoded(other, read, False), read


def test_part_of_an_event_pending_leaves_the_next_read_to_the_lines() -> None:
    one, _ = decoders("openai")
    out: deque[dict[str, Any]] = deque()
    one.feed(b"data: " + CHUNK, out)  # an event begun (its blank line not yet read)
    assert not one.whole(b"data: " + LAST + b"\n\n", out)
    assert not out
