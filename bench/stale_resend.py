"""What the stale keep-alive resend costs: the adapter on ``UpstreamClient.create()`` (PoolConnector and
the resend middleware) against the same session on a plain ``aiohttp.TCPConnector`` without middleware.

The fake OpenAI upstream runs in its own process; the two clients take turns in interleaved rounds (the
order flips every round) and the client's CPU per request is printed, median and minimum of the rounds.
On a shared machine read the minimum and the ratio, not single rounds.

    .venv/bin/python bench/stale_resend.py [--requests 1000] [--rounds 16] [--concurrency 1 16]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import aiohttp

from interlock.runtime.upstream.base import Endpoint
from interlock.runtime.upstream.client import USER_AGENT, UpstreamClient, adapter_for
from interlock.testing.process import FakeProcess

HI = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _without_resend() -> UpstreamClient:
    """The client as it was built before the resend: same settings, plain connector, no middleware."""
    connector = aiohttp.TCPConnector(limit=4096, limit_per_host=0, keepalive_timeout=30.0, ttl_dns_cache=300)
    session = aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None),
        headers={"User-Agent": USER_AGENT},
        raise_for_status=False,
        trust_env=False,
    )
    return UpstreamClient(session)


async def _round(client: UpstreamClient, ep: Endpoint, concurrency: int, requests: int) -> float:
    adapter = adapter_for("openai", client)
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await adapter.chat(ep, "m", HI)

    started = time.process_time()
    await asyncio.gather(*(one() for _ in range(requests)))
    return (time.process_time() - started) / requests * 1e6


async def _compare(url: str, concurrency: int, requests: int, rounds: int) -> None:
    ep = Endpoint(
        provider="fake",
        kind="openai",
        url=url,
        label="fake",
        headers={},
        connect_s=2.0,
        first_byte_s=5.0,
        total_s=10.0,
        max_body_bytes=32 << 20,
        max_line_bytes=1 << 20,
    )
    clients = {"with resend": UpstreamClient.create(), "without": _without_resend()}
    cpu: dict[str, list[float]] = {name: [] for name in clients}
    try:
        for n in range(rounds):
            order = list(clients) if n % 2 == 0 else list(reversed(clients))
            for name in order:
                cpu[name].append(await _round(clients[name], ep, concurrency, requests))
    finally:
        for client in clients.values():
            await client.aclose()
    base = statistics.median(cpu["without"])
    for name, values in cpu.items():
        median = statistics.median(values)
        print(
            f"concurrency {concurrency:3d}  {name:12s}  client CPU median {median:7.1f} µs/req"
            f"  min {min(values):7.1f}  ratio {median / base:5.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="requests per client and round")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:  # the gateway's loop when uvicorn[standard] is installed; else asyncio's own
        run = asyncio.run
    with FakeProcess("openai", "--no-record") as fake:
        for concurrency in args.concurrency:
            run(_compare(fake.base_url, concurrency, args.requests, args.rounds))


if __name__ == "__main__":
    main()
