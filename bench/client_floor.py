"""How cheap could the upstream client be? interlock's against aiohttp and a floor estimate.

Measures the CPU per request of interlock's OpenAIAdapter (the project's httptools client underneath,
runtime/net/http1.py, with deadlines, the pool, orjson and error mapping), of a plain
``aiohttp.ClientSession`` POST + ``json()`` (the best-kept asyncio client, no deadlines or mapping) and of a
minimal keep-alive HTTP/1.1 client on a raw asyncio Protocol with httptools' response parser (no timeouts
beyond one ``wait_for``, no error mapping, no streaming): the floor. All drive the fake OpenAI upstream
(own process) with 16 concurrent requests, in ``--rounds`` interleaved rounds; the median is printed.

    .venv/bin/python bench/client_floor.py [--requests 6000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import httptools
import orjson
import uvloop

from interlock.runtime.net.client import UpstreamClient
from interlock.runtime.upstream.base import adapter_for
from interlock.runtime.wire.base import Endpoint
from interlock.testing.fake_process import FakeProcess

BODY = {"model": "m", "messages": [{"role": "user", "content": "Say hello."}]}
CONCURRENCY = 16


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.parts: list[bytes] = []
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        waiter, self.waiter = self.waiter, None
        body, self.parts = b"".join(self.parts), []
        if waiter is not None:
            waiter.set_result((self.parser.get_status_code(), body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("upstream closed the connection"))


class _Pool:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[_Connection] = []

    async def post(self, head: bytes, body: bytes) -> Any:
        loop = asyncio.get_running_loop()
        if self.idle:
            conn = self.idle.pop()
        else:
            _, conn = await loop.create_connection(_Connection, self.host, self.port)
        conn.waiter = loop.create_future()
        conn.transport.write(head + body)
        status, data = await conn.waiter
        self.idle.append(conn)
        return status, orjson.loads(data)


async def _cpu_per_request(call: Any, requests: int) -> tuple[float, float]:
    async def worker(count: int) -> None:
        for _ in range(count):
            await call()

    await worker(200)
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(requests // CONCURRENCY) for _ in range(CONCURRENCY)))
    return (time.process_time() - cpu) / requests, requests / (time.perf_counter() - wall)


async def main(base_url: str, requests: int, rounds: int) -> None:
    client = UpstreamClient.create()
    adapter = adapter_for("openai", client)
    endpoint = Endpoint(
        provider="fake",
        kind="openai",
        url=base_url,
        label="fake",
        headers={"Authorization": "Bearer x"},
        connect_s=1,
        first_byte_s=5,
        total_s=10,
    )
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    url = f"{base_url}/chat/completions"
    headers = {"Authorization": "Bearer x", "Content-Type": "application/json"}

    async def aiohttp_call() -> Any:
        async with session.post(url, data=payload, headers=headers) as response:
            return await response.json()

    parts = urlsplit(base_url)
    pool = _Pool(parts.hostname or "127.0.0.1", parts.port or 80)
    payload = orjson.dumps(BODY)
    head = (
        f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nAuthorization: Bearer x\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode()
    calls: dict[str, Any] = {
        "OpenAIAdapter (interlock)": lambda: adapter.chat(endpoint, "m", BODY),
        "aiohttp ClientSession": aiohttp_call,
        "minimal httptools client": lambda: asyncio.wait_for(pool.post(head, payload), 10),
    }
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            figures[name].append(await _cpu_per_request(call, requests))
    floor = statistics.median(cpu for cpu, _ in figures["minimal httptools client"])
    for name, runs in figures.items():
        cpu = statistics.median(c for c, _ in runs)
        rps = statistics.median(r for _, r in runs)
        print(f"{name:26} {cpu * 1e6:6.0f} µs CPU per request  {cpu / floor:5.2f}x floor  {rps:7.0f} req/s")
    await session.close()
    await client.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with FakeProcess("openai", "--no-record") as fake:
        uvloop.run(main(fake.base_url, args.requests, args.rounds))
