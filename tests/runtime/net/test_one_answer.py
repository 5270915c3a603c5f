"""One answer per request, one send per POST: the client against a raw hostile upstream.

``Hostile`` is an HTTP/1.1 server on 127.0.0.1 written on asyncio's streams (not the aiohttp fakes, so
it can break HTTP the way a buggy or hostile server does). Two providers share it, one host:port with
two credentials: ``a`` (``KEY_A``) gets the misbehaviour under test, ``b`` (``KEY_B``) is answered well.
Every request asks for its own id and every answer names the id it answers, so an answer delivered to
the wrong request is seen, whoever's it is. The misbehaviours:

- ``late``: a second, unasked-for answer ~30 ms after the answer on the kept-alive connection (the
  server reads the next request only after it);
- ``pipelined``: the unasked-for answer in the same write as the answer;
- ``trailing``: bytes that are not HTTP at all in the same write as the answer;
- ``early``: an answer written before the next request was read (a separate write right after the
  answer, then the read);
- ``drop``: the request read in full, then the connection closed without a byte of answer;
- ``close``: the answer, then the connection closed before the next request was read.

Between turns a test waits until the server has done what it owes (written its extra answer, closed
its connection): that is the state the client can see before it writes the next request. An extra
answer still on the wire when the next request is written cannot be told from that request's answer
(docs/upstream-client.md, "One answer per request"): it stays inside its own provider's pool, which
``test_a_provider_never_sees_another_providers_connection`` shows with nothing waited for at all.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable

import orjson
import pytest

from interlock.runtime.base.errors import ProtocolFailure, UpstreamError
from interlock.runtime.net.client import UpstreamClient
from interlock.runtime.net.transport import Request
from interlock.runtime.upstream.base import Adapter, adapter_for
from interlock.runtime.wire.base import Endpoint
from tests.runtime.net.origins import origin
from tests.runtime.upstream.helpers import endpoint
from tests.waiting import until

KEY_A = "sk-provider-a-5d1c9e"
KEY_B = "sk-provider-b-82f0aa"
MODES = ("late", "pipelined", "trailing", "early", "drop", "close")
LATE_S = 0.03


def _answer(ask: str, stream: bool = False) -> bytes:
    """The answer to ``ask``: a ``chat.completion`` with its length, or a chunked event stream."""
    message = {"role": "assistant", "content": f"to {ask}"}
    if not stream:
        body = orjson.dumps(
            {
                "id": f"c-{ask}",
                "object": "chat.completion",
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        )
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        return head + body
    chunks = [
        {"index": 0, "delta": message, "finish_reason": None},
        {"index": 0, "delta": {}, "finish_reason": "stop"},
    ]
    events = b"".join(
        b"data: %s\n\n" % orjson.dumps({"id": f"c-{ask}", "object": "chat.completion.chunk", "choices": [c]})
        for c in chunks
    )
    events += b"data: [DONE]\n\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    return head + b"%x\r\n%s\r\n0\r\n\r\n" % (len(events), events)


class Hostile:
    """The server: answers ``KEY_B``'s requests well and misbehaves on ``KEY_A``'s as ``mode`` says."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.posts: collections.Counter[str] = collections.Counter()  # POSTs read in full, by credential
        self.keys: list[str] = []  # the Idempotency-Key of each POST read
        self.credentials: list[set[str]] = []  # the credentials seen on each connection
        self.owed = 0  # extra answers not yet written and closes not yet done
        self.last = "nothing"  # the id the last answer was for: what an unasked-for answer repeats

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen: set[str] = set()
        self.credentials.append(seen)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                fields = dict(
                    line.decode().lower().split(": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line
                )
                body = await reader.readexactly(int(fields.get("content-length", "0")))
                credential = fields.get("authorization", "").removeprefix("bearer ")
                seen.add(credential)
                self.posts[credential] += 1
                self.keys.append(fields.get("idempotency-key", ""))
                request = orjson.loads(body)
                ask, stream = request["messages"][-1]["content"], bool(request.get("stream"))
                if credential != KEY_A.lower():
                    writer.write(_answer(ask, stream))
                    await writer.drain()
                    continue
                if not await self._misbehave(writer, ask, stream):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _misbehave(self, writer: asyncio.StreamWriter, ask: str, stream: bool) -> bool:
        """Answer (or not) ``ask`` on provider a's connection; False: the connection is to close."""
        mode, extra = self.mode, _answer(self.last, stream)
        if mode == "trailing":
            extra = b"\x16\x03\x01 not HTTP at all\r\n\r\n"
        self.last = ask
        if mode in ("drop", "close"):
            self.owed += 1
            if mode == "close":
                writer.write(_answer(ask, stream))
                await writer.drain()
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self.owed -= 1
            return False
        if mode in ("pipelined", "trailing"):
            writer.write(_answer(ask, stream) + extra)
            await writer.drain()
            return True
        self.owed += 1
        writer.write(_answer(ask, stream))
        await writer.drain()
        await asyncio.sleep(LATE_S if mode == "late" else 0)
        try:
            writer.write(extra)  # unasked for: late, or early (before the next request is read)
            await writer.drain()
        except ConnectionError:
            pass  # the client dropped the connection already
        finally:
            self.owed -= 1
        return True

    async def settled(self) -> None:
        """Until every extra answer is written and every close done (a turn of the loop each poll)."""
        await until(lambda: self.owed == 0, "the server to write what it owes", pause_s=0)


@dataclasses.dataclass
class Tally:
    """What the callers got: right answers, answers meant for another request, failures, POSTs sent."""

    right: int = 0
    wrong: int = 0
    failed: int = 0
    sent: int = 0


def _provider(url: str, name: str, key: str) -> Endpoint:
    return dataclasses.replace(endpoint("openai", url, key=key), provider=name, label=name)


async def _with_hostile(
    mode: str, go: Callable[[Adapter, Endpoint, Endpoint, Hostile], Awaitable[None]]
) -> tuple[Hostile, UpstreamClient]:
    server = Hostile(mode)
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/v1"
    try:
        async with UpstreamClient.create() as client:
            await go(
                adapter_for("openai", client), _provider(url, "a", KEY_A), _provider(url, "b", KEY_B), server
            )
            return server, client
    finally:
        listener.close()


async def _ask(adapter: Adapter, ep: Endpoint, ask: str, tally: Tally, *, stream: bool = False) -> None:
    tally.sent += 1
    body = {"model": "m", "messages": [{"role": "user", "content": ask}], "stream": stream}
    try:
        if stream:
            chunks = [chunk async for chunk in await adapter.chat_stream(ep, "m", body)]
            text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        else:
            text = (await adapter.chat(ep, "m", body))["choices"][0]["message"]["content"]
    except UpstreamError:
        tally.failed += 1
        return
    if text == f"to {ask}":
        tally.right += 1
    else:
        tally.wrong += 1


def _expected(mode: str, n: int) -> Tally:
    """Provider a's callers: every answer right, or (``drop``) every request failed; never a wrong one."""
    return Tally(right=0, failed=n, sent=n) if mode == "drop" else Tally(right=n, sent=n)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("mode", MODES)
def test_sequential_requests_get_their_own_answers(mode: str, stream: bool) -> None:
    n = 12
    a, b = Tally(), Tally()

    async def go(adapter: Adapter, pa: Endpoint, pb: Endpoint, server: Hostile) -> None:
        for i in range(n):
            await _ask(adapter, pa, f"a{i}", a, stream=stream)
            await _ask(adapter, pb, f"b{i}", b, stream=stream)  # right after a's answer, its extra owed
            await server.settled()

    server, _ = asyncio.run(_with_hostile(mode, go))
    assert (a, b) == (_expected(mode, n), Tally(right=n, sent=n))
    assert server.posts == {KEY_A.lower(): n, KEY_B.lower(): n}  # POSTs received == POSTs sent
    assert all(len(seen) == 1 for seen in server.credentials)  # no connection carried both providers


@pytest.mark.parametrize("mode", MODES)
def test_concurrent_requests_get_their_own_answers(mode: str) -> None:
    rounds, each = 3, 8
    a, b = Tally(), Tally()

    async def go(adapter: Adapter, pa: Endpoint, pb: Endpoint, server: Hostile) -> None:
        for r in range(rounds):
            asks = [_ask(adapter, pa, f"a{r}.{i}", a) for i in range(each)]
            asks += [_ask(adapter, pb, f"b{r}.{i}", b) for i in range(each)]
            await asyncio.gather(*asks)
            await server.settled()

    server, _ = asyncio.run(_with_hostile(mode, go))
    n = rounds * each
    assert (a, b) == (_expected(mode, n), Tally(right=n, sent=n))
    assert server.posts == {KEY_A.lower(): n, KEY_B.lower(): n}
    assert all(len(seen) == 1 for seen in server.credentials)


@pytest.mark.parametrize("mode", ["late", "early"])
def test_a_provider_never_sees_another_providers_connection(mode: str) -> None:
    """Nothing waited for: provider a's requests go back to back, each extra answer may meet a's next
    request on the wire (the race no HTTP/1.1 client can see); b's answers, side by side with a's and
    in between, are all b's own."""
    n = 16
    a, b = Tally(), Tally()

    async def go(adapter: Adapter, pa: Endpoint, pb: Endpoint, server: Hostile) -> None:
        for i in range(n):
            await asyncio.gather(_ask(adapter, pa, f"a{i}", a), _ask(adapter, pb, f"b{i}", b))
            await _ask(adapter, pb, f"b{i}+", b)
        await server.settled()

    server, _ = asyncio.run(_with_hostile(mode, go))
    assert b == Tally(right=2 * n, sent=2 * n)
    assert a.sent == n
    assert server.posts[KEY_B.lower()] == 2 * n
    assert server.posts[KEY_A.lower()] <= n  # a connection a dropped may hold a request never read
    assert all(len(seen) == 1 for seen in server.credentials)


def test_a_dropped_request_is_reported_not_sent_again() -> None:
    """Read in full, then closed without an answer: one POST received for each sent, nothing resent."""

    async def go(adapter: Adapter, pa: Endpoint, pb: Endpoint, server: Hostile) -> None:
        await _ask(adapter, pb, "b0", Tally())  # b's connection stays in the pool meanwhile
        with pytest.raises(ProtocolFailure, match=r"^(server disconnected|connection reset)$"):
            await adapter.chat(pa, "m", {"model": "m", "messages": [{"role": "user", "content": "a0"}]})

    server, client = asyncio.run(_with_hostile("drop", go))
    assert server.posts == {KEY_B.lower(): 1, KEY_A.lower(): 1}
    assert client.resent("a") == client.resent("b") == 0.0


def test_each_post_carries_an_idempotency_key_of_its_providers_own() -> None:
    async def go(adapter: Adapter, pa: Endpoint, pb: Endpoint, server: Hostile) -> None:
        for i in range(3):
            await _ask(adapter, pa, f"a{i}", Tally())
            await _ask(adapter, pb, f"b{i}", Tally())

    server, _ = asyncio.run(_with_hostile("pipelined", go))
    keys = server.keys
    assert len(set(keys)) == 6  # one a POST
    prefixes = [key.rsplit("-", 1)[0] for key in keys]
    assert len(set(prefixes[0::2])) == len(set(prefixes[1::2])) == 1  # one prefix a provider...
    assert prefixes[0] != prefixes[1]  # ...not shared: a count of a's requests says nothing of b's
    assert [key.rsplit("-", 1)[1] for key in keys] == ["1", "1", "2", "2", "3", "3"]
    assert not any(KEY_A in key or KEY_B in key for key in keys)


def test_a_kind_without_idempotency_keys_sends_none() -> None:
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head.lower())
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        await writer.drain()
        writer.close()

    async def go() -> None:
        listener = await asyncio.start_server(serve, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
        loop = asyncio.get_running_loop()
        try:
            async with UpstreamClient.create() as client:
                for kind in ("ollama", "openai"):
                    at = loop.time() + 5
                    response = await client.send(
                        Request(origin(url, pool=kind, kind=kind), "POST", "/x", b"{}", at, at)
                    )
                    await response.read_all(100)
                    response.release()
        finally:
            listener.close()

    asyncio.run(go())
    assert [b"idempotency-key:" in head for head in seen] == [False, True]
