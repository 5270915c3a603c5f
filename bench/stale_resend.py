"""No replay under fire: requests while the upstream drops connections after reading a request.

The fake OpenAI upstream runs in its own process. Rounds alternate between a clean one and one where the
fake's ``disconnect`` fault closes a connection right after reading a request in full, ``--stale`` times a
round, spread over it. The upstream may have run such a request, so the client reports it and never
sends it again (runtime/net/client.py: only a request of which not a byte went out is resent).
Printed: the errors (a stale round: one per close expected), the replays the fake saw (POSTs received
less POSTs sent: 0 expected), and the client's CPU per request, median and minimum of the rounds (a
stale round's includes the fault's control calls and the fresh connections).

    .venv/bin/python bench/stale_resend.py [--requests 1000] [--rounds 8] [--concurrency 1 16] [--stale 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from interlock.runtime.base.errors import UpstreamError
from interlock.runtime.net.client import UpstreamClient
from interlock.runtime.upstream.base import adapter_for
from interlock.runtime.wire.base import Endpoint
from interlock.testing.fake_process import FakeProcess
from interlock.testing.faults import Fault

HI = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def _round(
    client: UpstreamClient,
    ep: Endpoint,
    concurrency: int,
    requests: int,
    close_every: int = 0,
    fake: FakeProcess | None = None,
) -> tuple[float, int]:
    adapter = adapter_for("openai", client)
    gate = asyncio.Semaphore(concurrency)
    errors = sent = 0

    async def one() -> None:
        nonlocal errors, sent
        async with gate:
            sent += 1
            if fake is not None and close_every and sent % close_every == 0:
                fake.set_fault(Fault.disconnect(), times=1)  # the next request's connection: closed
            try:
                await adapter.chat(ep, "m", HI)
            except UpstreamError:
                errors += 1

    started = time.process_time()
    await asyncio.gather(*(one() for _ in range(requests)))
    return (time.process_time() - started) / requests * 1e6, errors


async def _compare(fake: FakeProcess, concurrency: int, requests: int, rounds: int, stale: int) -> None:
    ep = Endpoint(
        provider="fake",
        kind="openai",
        url=fake.base_url,
        label="fake",
        headers={},
        connect_s=2.0,
        first_byte_s=5.0,
        total_s=10.0,
    )
    cpu: dict[str, list[float]] = {"clean": [], "stale": []}
    errors = {"clean": 0, "stale": 0}
    resends = 0
    async with UpstreamClient.create() as client:
        await _round(client, ep, concurrency, 100)  # warm: the pool holds `concurrency` connections
        for n in range(rounds * 2):
            name = "clean" if n % 2 == 0 else "stale"
            fake.clear_requests()
            every = requests // stale if name == "stale" else 0
            spent, failed = await _round(client, ep, concurrency, requests, every, fake)
            cpu[name].append(spent)
            errors[name] += failed
            if name == "stale":
                fake.clear_faults()
                resends += len(fake.requests()) - requests
    for name, values in cpu.items():
        print(
            f"concurrency {concurrency:3d}  {name:5s}  errors {errors[name]:3d}"
            f"  client CPU median {statistics.median(values):7.1f} µs/req  min {min(values):7.1f}"
            + (f"  replays {resends} ({stale} closes a round)" if name == "stale" else "")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=8, help="pairs of rounds (clean, stale)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--stale", type=int, default=20, help="connections the fake closes a stale round")
    args = parser.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:  # the gateway's loop when uvicorn[standard] is installed; else asyncio's own
        run = asyncio.run
    with FakeProcess("openai") as fake:  # recording: the resends are counted from what it received
        for concurrency in args.concurrency:
            run(_compare(fake, concurrency, args.requests, args.rounds, args.stale))


if __name__ == "__main__":
    main()
