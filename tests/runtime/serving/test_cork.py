"""CorkedTransport on a real socket pair: one send per loop step, nothing held past its step."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from interlock.runtime.serving.cork import CorkedTransport


@dataclass
class Sends:
    """The real transport's writes, as the corked one made them."""

    writes: list[bytes] = field(default_factory=list)


@asynccontextmanager
async def corked_pair() -> AsyncIterator[tuple[CorkedTransport, Sends, socket.socket]]:
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_connection(asyncio.Protocol, sock=ours)
    sends = Sends()
    real_write = transport.write

    def recording_write(data: bytes | bytearray | memoryview) -> None:
        sends.writes.append(bytes(data))
        real_write(data)

    transport.write = recording_write  # type: ignore[method-assign]
    theirs.setblocking(False)
    try:
        yield CorkedTransport(transport, loop), sends, theirs
    finally:
        transport.abort()
        theirs.close()


async def received(peer: socket.socket, size: int) -> bytes:
    loop = asyncio.get_running_loop()
    data = b""
    while len(data) < size:
        chunk = await asyncio.wait_for(loop.sock_recv(peer, 65536), 60)
        if not chunk:
            break
        data += chunk
    return data


async def scenario_writes_of_one_step_leave_as_one_send() -> None:
    async with corked_pair() as (corked, sends, peer):
        corked.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        assert sends.writes == []
        assert corked.get_write_buffer_size() == 38
        corked.write(b"{}")  # joins the held head, and both go at once
        corked.write(b"")  # nothing to send: nothing held
        assert sends.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
        await asyncio.sleep(0)  # the scheduled flush finds nothing held
        assert len(sends.writes) == 1
        assert await received(peer, 40) == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"


async def scenario_at_most_one_write_is_held() -> None:
    """Flow control sees every write but one: a writer that never yields still fills the transport."""
    async with corked_pair() as (corked, sends, _peer):
        for n in range(5):
            corked.write(b"%d" % n)
        assert sends.writes == [b"01", b"23"]
        assert corked.get_write_buffer_size() >= 1  # b"4", held
        await asyncio.sleep(0)
        assert sends.writes == [b"01", b"23", b"4"]


async def scenario_nothing_waits_past_the_step_that_wrote_it() -> None:
    """A stream's chunks (or a 100 Continue) written in separate steps go out in their own step."""
    async with corked_pair() as (corked, sends, peer):
        corked.writelines([b"data: 1\n\n"])
        await asyncio.sleep(0)
        assert sends.writes == [b"data: 1\n\n"]
        assert await received(peer, 9) == b"data: 1\n\n"
        corked.write(bytearray(b"data: 2\n\n"))
        await asyncio.sleep(0)
        assert sends.writes == [b"data: 1\n\n", b"data: 2\n\n"]


async def scenario_close_sends_what_is_held_first() -> None:
    async with corked_pair() as (corked, sends, peer):
        corked.write(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
        corked.close()
        assert corked.is_closing()
        assert sends.writes == [b"HTTP/1.1 408 Request Timeout\r\n\r\n"]
        assert await received(peer, 1000) == b"HTTP/1.1 408 Request Timeout\r\n\r\n"  # then EOF
        await asyncio.sleep(0)  # the scheduled flush finds nothing left
        assert len(sends.writes) == 1


async def scenario_abort_drops_what_is_held() -> None:
    async with corked_pair() as (corked, sends, peer):
        corked.write(b"never sent")
        corked.abort()
        await asyncio.sleep(0)
        assert sends.writes == []
        assert await received(peer, 1) == b""


def test_writes_of_one_step_leave_as_one_send() -> None:
    asyncio.run(scenario_writes_of_one_step_leave_as_one_send())


def test_nothing_waits_past_the_step_that_wrote_it() -> None:
    asyncio.run(scenario_nothing_waits_past_the_step_that_wrote_it())


def test_close_sends_what_is_held_first() -> None:
    asyncio.run(scenario_close_sends_what_is_held_first())


def test_abort_drops_what_is_held() -> None:
    asyncio.run(scenario_abort_drops_what_is_held())


def test_at_most_one_write_is_held() -> None:
    asyncio.run(scenario_at_most_one_write_is_held())
