"""One answer per request, one send per POST: the figures behind docs/upstream-client.md's table.

Runs the scenarios of tests/runtime/net/test_one_answer.py (a raw asyncio server that providers a
and b share, one host:port and two credentials, misbehaving for a in six ways) and prints, for each
misbehaviour and scenario, what each provider's callers got (right, wrong: another request's answer,
failed) and the POSTs the server received. ``--no-wait``: a's requests go back to back, without giving
the server the time to do what it owes (the residual race: a's own answers may shift, b's may not).
The tree measured is the one on ``PYTHONPATH`` (``git archive`` an older one to compare).

    PYTHONPATH=. .venv/bin/python bench/one_answer.py [--sequential 20] [--rounds 4] [--each 10] [--no-wait]
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Coroutine
from typing import Any

from interlock.runtime.upstream.base import Adapter
from interlock.runtime.wire.base import Endpoint
from tests.runtime.net.test_one_answer import KEY_A, KEY_B, MODES, Hostile, Tally, _ask, _with_hostile

Outcome = tuple[Tally, Tally, int, int, int]  # a's, b's, POSTs a and b received, connections both rode


async def _sequential(mode: str, n: int, wait: bool, stream: bool) -> Outcome:
    a, b = Tally(), Tally()

    async def go(adapter: Adapter, pa: Endpoint, pb: Endpoint, server: Hostile) -> None:
        for i in range(n):
            await _ask(adapter, pa, f"a{i}", a, stream=stream)
            await _ask(adapter, pb, f"b{i}", b, stream=stream)
            if wait:
                await server.settled()
        await server.settled()

    return _outcome(a, b, (await _with_hostile(mode, go))[0])


async def _concurrent(mode: str, rounds: int, each: int, wait: bool) -> Outcome:
    a, b = Tally(), Tally()

    async def go(adapter: Adapter, pa: Endpoint, pb: Endpoint, server: Hostile) -> None:
        for r in range(rounds):
            asks = [_ask(adapter, pa, f"a{r}.{i}", a) for i in range(each)]
            asks += [_ask(adapter, pb, f"b{r}.{i}", b) for i in range(each)]
            await asyncio.gather(*asks)
            if wait:
                await server.settled()
        await server.settled()

    return _outcome(a, b, (await _with_hostile(mode, go))[0])


def _outcome(a: Tally, b: Tally, server: Hostile) -> Outcome:
    mixed = sum(len(seen) > 1 for seen in server.credentials)
    return a, b, server.posts[KEY_A.lower()], server.posts[KEY_B.lower()], mixed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sequential", type=int, default=20, help="sequential requests a provider")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of concurrent requests")
    parser.add_argument("--each", type=int, default=10, help="concurrent requests a provider a round")
    parser.add_argument("--no-wait", action="store_true", help="do not wait for the server between turns")
    args = parser.parse_args()
    wait = not args.no_wait
    print(
        f"{'misbehaviour':10} {'scenario':12} provider a: right/wrong/failed, POSTs | provider b: same | both"
    )
    for mode in MODES:
        runs: list[tuple[str, Coroutine[Any, Any, Outcome]]] = [
            (f"seq {args.sequential}", _sequential(mode, args.sequential, wait, False)),
            (f"seq {args.sequential} sse", _sequential(mode, args.sequential, wait, True)),
            (f"conc {args.rounds}x{args.each}", _concurrent(mode, args.rounds, args.each, wait)),
        ]
        for name, run in runs:
            a, b, posts_a, posts_b, mixed = asyncio.run(run)
            counts_a = f"{a.right:3}/{a.wrong:3}/{a.failed:3} of {a.sent:3}, {posts_a:3} received"
            counts_b = f"{b.right:3}/{b.wrong:3}/{b.failed:3} of {b.sent:3}, {posts_b:3} received"
            print(f"{mode:10} {name:12} {counts_a} | {counts_b} | {mixed} conns")


if __name__ == "__main__":
    main()
