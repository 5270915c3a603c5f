"""Who waits when the GPUs are full: a quiet tenant beside a flooder, FIFO against fair queuing.

The real slot table (``runtime/state/memory.py``, ``pool.py``, the fair order of ``fair.py``) runs on an
event loop whose clock is virtual: when nothing is ready the loop jumps to its next timer instead of
sleeping, so thousands of simulated seconds take one or two real ones and the machine's load does not
change the figures (they depend only on the seed). One worker, 4 slots, service times exponential
with a mean of 1 s (capacity 4 requests/s), the queue 64 deep with a 120 s `max_wait`.

Two tenants on the saturated model: a quiet one, and a flooder sending 10x the quiet one's mean rate
(6 requests/s: 150% of capacity, so its waiters fill the queue). The quiet tenant's traffic is Poisson,
or bursts (an agent fanning out 8 or 32 requests at once) at the same mean rate. For each, its p95
queue wait alone on the model, then beside the flooder under FIFO (no tenant configured: one share for
all) and under fair queuing (equal weights, and the quiet tenant at weight 4), with the ratio to its
wait alone, the share of its requests turned away (429), and the slots' use (work-conserving: a fair
queue keeps them as full as FIFO does).

Then priority classes: interactive traffic (Poisson, 30% of capacity) beside a batch flood (10x),
batch as its own class against batch in the same class (FIFO): the interactive p95 wait against the
wait for the first of 4 busy slots to free (the bound: batch delays interactive by at most that).

    .venv/bin/python bench/fair_queue.py [--seconds 4000] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import selectors
import statistics
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

from interlock.runtime.base.errors import SlotUnavailable
from interlock.runtime.loaded.callers import COMMON, Turn
from interlock.runtime.loaded.tables import WorkerLimits
from interlock.runtime.state.memory import MemorySlots

SLOTS = 4
SERVICE_S = 1.0  # mean
QUIET_RATE = 0.6  # requests/s (15% of capacity); the flooder sends 10x that
LIMITS = {"gpu": WorkerLimits("gpu", "local", None, {}, SLOTS, {}, (), max_waiting=64, max_wait_s=120.0)}


class _Jump(selectors.DefaultSelector):
    """A selector that never waits: asked to wait ``timeout`` seconds, it moves the loop's clock."""

    loop: VirtualLoop

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout is None:
            raise RuntimeError("the simulation has nothing left scheduled and is not done")
        if timeout > 0:
            self.loop.now += timeout
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        selector = _Jump()
        super().__init__(selector)
        selector.loop = self
        self.now = 0.0

    def time(self) -> float:
        return self.now


@dataclass
class Tally:
    waits: list[float] = field(default_factory=list)
    refused: int = 0
    served_s: float = 0.0
    by_arrival: dict[float, float] = field(default_factory=dict)  # arrival time -> wait
    batch_left: dict[float, float] = field(default_factory=dict)  # arrival -> longest batch service left

    def p95(self) -> float:
        return statistics.quantiles(self.waits, n=20)[-1] if len(self.waits) >= 20 else float("nan")

    def refused_share(self) -> float:
        total = len(self.waits) + self.refused
        return self.refused / total if total else 0.0


@dataclass
class Run:
    """What one run's requests share: when each batch request in service ends, how many interactive
    requests wait, and the batch service left when their backlog began (nobody interactive waiting)."""

    batch_ends: dict[int, float] = field(default_factory=dict)
    waiting: int = 0
    backlog_s: float = 0.0
    ids: Iterator[int] = field(default_factory=itertools.count)


async def request(slots: MemorySlots, turn: Turn, service_s: float, tally: Tally, run: Run) -> None:
    loop = asyncio.get_running_loop()
    arrived = loop.time()
    if not turn.batch:
        if run.waiting == 0:
            run.backlog_s = max((end - arrived for end in run.batch_ends.values()), default=0.0)
        tally.batch_left[arrived] = run.backlog_s
        run.waiting += 1
    try:
        lease = await slots.acquire("gpu", "m", SLOTS, wait=True, turn=turn)
    except SlotUnavailable:
        tally.refused += 1
        return
    finally:
        if not turn.batch:
            run.waiting -= 1
    assert lease is not None
    tally.waits.append(loop.time() - arrived)
    tally.by_arrival[arrived] = loop.time() - arrived
    me = next(run.ids)
    if turn.batch:
        run.batch_ends[me] = loop.time() + service_s
    await asyncio.sleep(service_s)
    run.batch_ends.pop(me, None)
    tally.served_s += service_s
    await lease.release()


Source = Callable[
    [MemorySlots, float, random.Random, set[asyncio.Task[None]], Run],
    Coroutine[Any, Any, None],
]


def poisson(turn: Turn, rate: float, tally: Tally, burst: int = 1) -> Source:
    """Bursts of ``burst`` requests at once, bursts arriving as a Poisson process: ``rate`` requests/s."""

    async def source(
        slots: MemorySlots,
        until: float,
        rng: random.Random,
        tasks: set[asyncio.Task[None]],
        run: Run,
    ) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(rng.expovariate(rate / burst))
            if loop.time() >= until:
                return
            for _ in range(burst):
                task = loop.create_task(request(slots, turn, rng.expovariate(1 / SERVICE_S), tally, run))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

    return source


def simulate(sources: list[Source], seconds: float, seed: int) -> float:
    """Run ``sources`` for ``seconds`` of virtual time (then let what was admitted finish); the slots'
    use over the arrival window (busy slot-seconds / slots x seconds)."""
    loop = VirtualLoop()
    try:
        asyncio.set_event_loop(loop)
        slots = MemorySlots()
        slots.configure(LIMITS)
        tasks: set[asyncio.Task[None]] = set()
        run = Run()
        busy = [0.0]

        async def watch() -> None:
            last = 0.0
            while loop.time() < seconds:
                await asyncio.sleep(0.25)
                busy[0] += slots.local("gpu").in_use * (loop.time() - last)
                last = loop.time()

        async def main() -> None:
            rngs = [random.Random(seed * 1000 + i) for i in range(len(sources))]
            await asyncio.gather(
                watch(),
                *(src(slots, seconds, rng, tasks, run) for src, rng in zip(sources, rngs, strict=True)),
            )
            while tasks:
                await asyncio.gather(*list(tasks))

        loop.run_until_complete(main())
        return busy[0] / (SLOTS * seconds)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def tenants(seconds: float, seed: int) -> None:
    flood_rate = 10 * QUIET_RATE
    print(
        f"one worker, {SLOTS} slots, service exp(mean {SERVICE_S:g} s); quiet tenant {QUIET_RATE:g} req/s, "
        f"flooder {flood_rate:g} req/s ({flood_rate * SERVICE_S / SLOTS:.0%} of capacity); "
        f"{seconds:g} simulated s, seed {seed}"
    )
    print(
        f"{'quiet traffic':16} {'run':26} {'quiet p95 wait':>14} {'x alone':>8} {'quiet 429':>9} "
        f"{'flood 429':>9} {'slots used':>10}"
    )
    for burst in (1, 8, 32):
        shape = "Poisson" if burst == 1 else f"bursts of {burst}"
        alone = Tally()
        used = simulate([poisson(Turn("quiet"), QUIET_RATE, alone, burst)], seconds, seed)
        base = alone.p95()
        rows: list[tuple[str, Tally, Tally, float]] = [("alone", alone, Tally(), used)]
        for name, quiet_turn, flood_turn in (
            ("beside flooder, FIFO", COMMON, COMMON),
            ("beside flooder, fair", Turn("quiet"), Turn("flood")),
            ("beside flooder, fair (w 4)", Turn("quiet", 4.0), Turn("flood")),
        ):
            quiet, flood = Tally(), Tally()
            used = simulate(
                [
                    poisson(quiet_turn, QUIET_RATE, quiet, burst),
                    poisson(flood_turn, flood_rate, flood),
                ],
                seconds,
                seed,
            )
            rows.append((name, quiet, flood, used))
        for name, quiet, flood, used in rows:
            p95 = quiet.p95()
            ratio = f"{p95 / base:8.2f}" if base > 0 else f"{'(alone 0)':>8}"
            print(
                f"{shape:16} {name:26} {p95:12.2f} s {ratio} {quiet.refused_share():9.1%} "
                f"{flood.refused_share():9.1%} {used:10.1%}"
            )


def classes(seconds: float, seed: int) -> None:
    """The interactive source has the same seed in every run, so its requests (arrival and service
    time) are the same ones: the delay batch adds is paired per request, and set against the longest
    service time the batch requests holding slots had left when the interactive backlog it joined
    began (the rule: batch delays interactive work by at most one batch request's service per slot,
    the one in service when interactive work came)."""
    rate = 0.3 * SLOTS / SERVICE_S
    print(f"\ninteractive {rate:g} req/s (30% of capacity) beside {10 * rate:g} req/s of other work")
    print(
        f"{'run':34} {'interactive p95':>15} {'added p95':>10} {'added max':>10} {'within rule':>11} "
        f"{'other 429':>9} {'slots used':>10}"
    )
    alone = Tally()
    used = simulate([poisson(Turn("app"), rate, alone)], seconds, seed)
    print(f"{'interactive alone':34} {alone.p95():13.2f} s {'':>10} {'':>10} {'':>11} {'':>9} {used:10.1%}")
    for name, chat_turn, other_turn in (
        ("beside it, FIFO (no tenants)", COMMON, COMMON),
        ("beside it, two tenants, one class", Turn("app"), Turn("jobs")),
        ("beside it as batch", Turn("app"), Turn("jobs", batch=True)),
    ):
        chat, bulk = Tally(), Tally()
        used = simulate([poisson(chat_turn, rate, chat), poisson(other_turn, 10 * rate, bulk)], seconds, seed)
        paired = [
            (at, wait - alone.by_arrival[at])
            for at, wait in chat.by_arrival.items()
            if at in alone.by_arrival
        ]
        added = [delay for _, delay in paired]
        within = sum(delay <= chat.batch_left[at] + 1e-9 for at, delay in paired) / len(paired)
        rule = f"{within:11.1%}" if other_turn.batch else f"{'':>11}"
        print(
            f"{name:34} {chat.p95():13.2f} s {statistics.quantiles(added, n=20)[-1]:8.2f} s "
            f"{max(added):8.2f} s {rule} {bulk.refused_share():9.1%} {used:10.1%}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4000.0, help="simulated seconds of arrivals")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    tenants(args.seconds, args.seed)
    classes(args.seconds, args.seed)
