"""The floor for relaying a stream in Python: a byte-for-byte TCP pipe on uvloop, no HTTP, no parsing.

Each client connection gets its own connection to ``HOST:PORT``; whatever arrives on one side is
written to the other in the same callback (one read and one write per upstream chunk, nothing else).
bench/streams.py runs it as the ``tcp relay`` row: what any Python gateway on this machine pays per
relayed chunk before it does any work of its own.

    .venv/bin/python bench/tcp_relay.py 127.0.0.1:8000     # prints "relaying on PORT", then serves
"""

from __future__ import annotations

import asyncio
import sys

import uvloop


class Side(asyncio.Protocol):
    """One end of a pipe; ``peer`` is the other end's transport once both are connected."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: Side | None = None
        self.early: list[bytes] = []  # what arrived before the other end was connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self.early.append(data)
        else:
            peer.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


async def main(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    connecting: set[asyncio.Task[None]] = set()

    class Downstream(Side):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            task = loop.create_task(self._connect())
            connecting.add(task)
            task.add_done_callback(connecting.discard)

        async def _connect(self) -> None:
            try:
                _, up = await loop.create_connection(Side, host, port)
            except OSError:
                assert self.transport is not None
                self.transport.close()
                return
            up.peer, self.peer = self, up
            assert up.transport is not None
            for data in self.early:
                up.transport.write(data)
            self.early.clear()

    server = await loop.create_server(Downstream, "127.0.0.1", 0, backlog=4096)
    print(f"relaying on {server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    target_host, target_port = sys.argv[1].rsplit(":", 1)
    uvloop.run(main(target_host, int(target_port)))
