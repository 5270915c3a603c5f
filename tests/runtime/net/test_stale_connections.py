"""No replay of a written request (runtime/net/client.py's docstring states the rule): a request is
sent again, once, only when not a byte of it went out; a connection closed or reset after the write,
an answer cut after its first bytes and a dead upstream are reported as they are.

The fake upstream's ``disconnect`` fault aborts the connection after reading the request in full and
before a byte of answer: the upstream may have run it, so it is never sent twice.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from interlock.runtime.base.errors import ConnectFailed, ProtocolFailure
from interlock.runtime.books.metrics import CounterVec
from interlock.runtime.net import http1, http_errors
from interlock.runtime.net.client import UpstreamClient
from interlock.runtime.net.transport import Request
from interlock.runtime.upstream.base import Adapter, adapter_for
from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.runtime.net.origins import origin
from tests.runtime.upstream.helpers import endpoint
from tests.waiting import until

HI = {"model": "my-alias", "messages": [{"role": "user", "content": "hello there"}]}
STREAM = {**HI, "stream": True}
T = TypeVar("T")


def _with_one_client(kind: str, fn: Callable[[Adapter], Awaitable[T]]) -> T:
    async def go() -> T:
        async with UpstreamClient.create() as client:
            return await fn(adapter_for(kind, client))

    return asyncio.run(go())


async def _drain(chunks: Any) -> list[dict[str, Any]]:
    return [chunk async for chunk in chunks]


@pytest.mark.parametrize("streaming", [False, True])
def test_a_request_read_and_then_dropped_is_not_sent_again(openai_fake: FakeOpenAI, streaming: bool) -> None:
    """The upstream read the request in full and closed the kept-alive connection without a byte of
    answer: it may have run it (and billed it), so the failure is reported, never replayed."""
    ep = endpoint("openai", openai_fake.base_url)
    opened = openai_fake.connections_opened

    async def go(adapter: Adapter) -> Any:
        await adapter.chat(ep, "m1", HI)  # the connection goes back to the pool
        openai_fake.set_fault(Fault.disconnect(), times=1)
        if streaming:
            return await _drain(await adapter.chat_stream(ep, "m1", STREAM))
        return await adapter.chat(ep, "m1", HI)

    with pytest.raises(ProtocolFailure, match=r"^(server disconnected|connection reset)$"):
        _with_one_client("openai", go)
    assert len(openai_fake.requests) == 2  # two POSTs sent, two received: no replay
    assert openai_fake.connections_opened - opened == 1


def test_ollama_does_not_replay_either(ollama_fake: FakeOllama) -> None:
    ep = endpoint("ollama", ollama_fake.url, key=None)

    async def go(adapter: Adapter) -> dict[str, Any]:
        await adapter.chat(ep, "llama3.2:3b", HI)
        ollama_fake.set_fault(Fault.disconnect(), times=1)
        return await adapter.chat(ep, "llama3.2:3b", HI)

    with pytest.raises(ProtocolFailure):
        _with_one_client("ollama", go)
    assert len(ollama_fake.requests) == 2


def test_a_fresh_connection_closed_before_the_answer_is_not_resent(openai_fake: FakeOpenAI) -> None:
    ep = endpoint("openai", openai_fake.base_url)
    openai_fake.set_fault(Fault.disconnect(), times=1)

    async def go(adapter: Adapter) -> Any:
        return await adapter.chat(ep, "m1", HI)

    with pytest.raises(
        ProtocolFailure, match=r"^(server disconnected|connection reset|connection failed mid-exchange)$"
    ):
        _with_one_client("openai", go)
    assert len(openai_fake.requests) == 1


def _close_pooled(client: UpstreamClient) -> int:
    """Start closing every pooled connection's transport, as a loop does once it has seen the upstream's
    close (the transport is closing, its protocol not told yet): how many there were."""
    closing = 0
    for pool in client._pools.values():
        for conn in pool.idle:
            assert conn.transport is not None
            conn.transport.close()
            closing += 1
    return closing


def test_a_connection_seen_closing_before_the_write_is_resent_once_and_counted(
    openai_fake: FakeOpenAI,
) -> None:
    ep = endpoint("openai", openai_fake.base_url)
    opened = openai_fake.connections_opened

    async def go() -> tuple[Any, int, float]:
        async with UpstreamClient.create() as client:
            adapter = adapter_for("openai", client)
            await adapter.chat(ep, "m1", HI)
            closing = _close_pooled(client)
            answer = await adapter.chat(ep, "m1", HI)  # found closing at the write: sent on a fresh one
            return answer, closing, client.resent(ep.label)

    answer, closing, resent = asyncio.run(go())
    assert answer["choices"][0]["message"]["content"]
    assert (closing, resent) == (1, 1.0)
    assert len(openai_fake.requests) == 2  # the resent request was never written the first time
    assert openai_fake.connections_opened - opened == 2
    # one Idempotency-Key a request (its head is built once: a resend carries the same bytes)
    keys = [r.headers.get("idempotency-key") for r in openai_fake.requests]
    assert all(keys)
    assert keys[0] != keys[1]


def test_resends_count_into_the_gateways_metric(openai_fake: FakeOpenAI) -> None:
    ep = endpoint("openai", openai_fake.base_url)
    resends = CounterVec(
        "interlock_upstream_resends", "resends", ["endpoint"]
    )  # as runtime/books/metrics.py has

    async def go() -> None:
        async with UpstreamClient.create(resends=resends.labels) as client:
            adapter = adapter_for("openai", client)
            await adapter.chat(ep, "m1", HI)
            _close_pooled(client)
            await adapter.chat(ep, "m1", HI)

    asyncio.run(go())
    assert {labels: child.value for labels, child in resends.children.items()} == {(ep.label,): 1.0}


def test_the_resend_happens_once(openai_fake: FakeOpenAI) -> None:
    """The resend's own connection fails after the write: reported as it is, no third try."""
    ep = endpoint("openai", openai_fake.base_url)

    async def go() -> tuple[BaseException, float]:
        async with UpstreamClient.create() as client:
            adapter = adapter_for("openai", client)
            await adapter.chat(ep, "m1", HI)
            _close_pooled(client)
            openai_fake.set_fault(Fault.disconnect(), times=1)
            with pytest.raises(ProtocolFailure) as info:
                await adapter.chat(ep, "m1", HI)
            return info.value, client.resent(ep.label)

    _, resent = asyncio.run(go())
    assert resent == 1.0
    assert len(openai_fake.requests) == 2  # answered; resent and dropped after reading: no third


def test_an_answer_cut_after_its_first_bytes_is_not_resent(openai_fake: FakeOpenAI) -> None:
    ep = endpoint("openai", openai_fake.base_url)

    async def go(adapter: Adapter) -> Any:
        await adapter.chat(ep, "m1", HI)
        openai_fake.set_fault(Fault.cut_stream(after_chunks=1), times=1)
        return await _drain(await adapter.chat_stream(ep, "m1", STREAM))

    with pytest.raises(ProtocolFailure):
        _with_one_client("openai", go)
    assert len(openai_fake.requests) == 2


def test_an_upstream_that_dies_with_a_request_on_a_pooled_connection_is_not_resent() -> None:
    """The request was written and the box died before answering: reported (the next request finds
    the box refusing connections), not sent again."""
    with FakeOpenAI() as fake:
        ep = endpoint("openai", fake.base_url)

        async def go(adapter: Adapter) -> Any:
            await adapter.chat(ep, "m1", HI)
            fake.set_fault(Fault.hang())
            pending = asyncio.ensure_future(adapter.chat(ep, "m1", HI))
            # the request is on the pooled connection, unanswered (the fake's state, in its own thread)
            await until(lambda: len(fake.requests) >= 2, "the request to reach the fake")
            fake.refuse_connections()  # the box dies: that connection is reset, new ones refused
            return await pending

        with pytest.raises(ProtocolFailure, match=r"^(connection reset|server disconnected)$"):
            _with_one_client("openai", go)
        assert len(fake.requests) == 2


def test_an_upstream_that_died_while_its_connection_sat_idle_is_connect_failed() -> None:
    """The demo's step 3: the box dies, and the gateway's loop has not yet read the reset of the
    connection idling in its pool (a loaded machine) when the next request takes that connection."""
    with FakeOpenAI() as fake:
        ep = endpoint("openai", fake.base_url)

        async def go(adapter: Adapter) -> Any:
            await adapter.chat(ep, "m1", HI)  # one connection, idle in the pool
            fake.refuse_connections()  # reset, from the fake's own thread
            while fake.open_connections:  # blocking on purpose: this loop must not read the reset
                time.sleep(0.001)  # noqa: ASYNC251
            return await adapter.chat(ep, "m1", HI)  # takes the pooled connection at once

        with pytest.raises(ConnectFailed, match=r"^connection refused or unreachable$"):
            _with_one_client("openai", go)


@pytest.mark.parametrize(
    ("exc", "stale"),
    [
        (None, http_errors.Disconnected),  # a clean close (FIN) before any byte of the answer
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), http_errors.Reset),
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), http_errors.Reset),
        (OSError(errno.ECONNRESET, "Connection reset by peer"), http_errors.Reset),
        (OSError(errno.EHOSTUNREACH, "No route to host"), http_errors.Lost),
    ],
)
def test_which_lost_connections_count_as_stale(
    exc: Exception | None, stale: type[http_errors.HTTPError]
) -> None:
    error = http1.lost_error(exc)
    assert type(error) is stale
    assert isinstance(error, http_errors.Stale) is (stale is not http_errors.Lost)


def test_an_answer_cut_inside_its_head_is_not_resent() -> None:
    """Bytes of the answer arrived on a pooled connection, then it closed: CutShort, not Stale, and not
    sent again (a loopback server answers the first request whole, the second with half a head)."""
    answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", b"HTTP/1.1 200 OK\r\nContent-Le"]
    requests: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while answers:
            head = await reader.readuntil(b"\r\n\r\n")
            requests.append(head)
            writer.write(answers.pop(0))
            await writer.drain()
        writer.close()

    async def go() -> BaseException:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        loop = asyncio.get_running_loop()
        try:
            async with UpstreamClient.create() as client:

                async def get() -> http1.Response:
                    at = loop.time() + 5
                    return await client.send(
                        Request(origin(f"http://127.0.0.1:{port}"), "GET", "/", None, at, at)
                    )

                first = await get()
                assert await first.read_all(100) == b"{}"
                first.release()
                with pytest.raises(http_errors.HTTPError) as info:
                    await get()
                return info.value
        finally:
            server.close()

    error = asyncio.run(go())
    assert isinstance(error, http_errors.CutShort)
    assert not isinstance(error, http_errors.Stale)
    assert len(requests) == 2  # the one answered, the one cut: no resend


def test_the_bookkeeping_holds_nothing_once_requests_are_over(openai_fake: FakeOpenAI) -> None:
    ep = endpoint("openai", openai_fake.base_url)

    async def go() -> list[int]:
        async with UpstreamClient.create() as client:
            adapter = adapter_for("openai", client)
            await adapter.chat(ep, "m1", HI)
            _close_pooled(client)
            await adapter.chat(ep, "m1", HI)  # resent
            openai_fake.set_fault(Fault.disconnect(), times=1)
            with pytest.raises(ProtocolFailure):
                await adapter.chat(ep, "m1", HI)  # dropped after the write: reported
            await until(lambda: client.open_connections == client.idle_connections(), "closes read")
            return [client.open_connections - client.idle_connections(), client.waiting]

    assert asyncio.run(go()) == [0, 0]


def test_a_write_that_fails_at_once_is_resent_once() -> None:
    """asyncio's own loop sends in ``write``: a pooled connection whose socket can no longer send (shut
    for writing here, as after a reset) fails the write itself, so not a byte went out: resent once on
    a fresh connection, and counted. (uvloop queues writes: there the failure comes after the write
    and is reported, never resent.)"""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                heads.append(await reader.readuntil(b"\r\n\r\n"))
                await reader.readexactly(2)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def go() -> tuple[list[bytes], float]:
        listener = await asyncio.start_server(serve, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
        loop = asyncio.get_running_loop()
        try:
            async with UpstreamClient.create() as client:
                bodies = []
                for n in range(2):
                    if n == 1:  # the pooled connection's socket cannot send any more
                        for pool in client._pools.values():
                            for conn in pool.idle:
                                assert conn.transport is not None
                                conn.transport.get_extra_info("socket").shutdown(socket.SHUT_WR)
                    at = loop.time() + 5
                    response = await client.send(Request(origin(url, pool="p"), "POST", "/x", b"{}", at, at))
                    bodies.append(await response.read_all(100))
                    response.release()
                assert bodies == [b"{}", b"{}"]
                return heads, client.resent("p")
        finally:
            listener.close()

    with asyncio.Runner(
        loop_factory=asyncio.SelectorEventLoop
    ) as runner:  # asyncio's own, whatever the policy
        received, resent = runner.run(go())
    assert (len(received), resent) == (2, 1.0)  # two requests, each received once; one resend
