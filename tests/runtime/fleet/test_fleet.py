"""The fleet line: unbound waiters per candidate, dispatched on every release to the soonest worker.

Real slot tables and a real scorer; the clock is injected, so a hold-out ends by moving it, not by
sleeping. Every wait is on a future or on the line's state."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from interlock.runtime.base.errors import SlotUnavailable
from interlock.runtime.fleet.line import FleetLine
from interlock.runtime.fleet.live_facts import LiveFacts
from interlock.runtime.fleet.scoring import Scorer, backend_occupancy
from interlock.runtime.fleet.speeds import SpeedBook
from interlock.runtime.loaded.callers import COMMON, Turn
from interlock.runtime.loaded.plan import RuntimePlan, load_plan
from interlock.runtime.state.base import Lease
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.telemetry.collector import TelemetryBook, targets
from tests.runtime.conftest import compile_text
from tests.waiting import until

CONFIG = """\
version: 1
providers:
  local:
    kind: ollama
    workers:
      - {{name: a, url: "http://127.0.0.1:9", max_concurrent: 1, queue: {queue}}}
      - {{name: b, url: "http://127.0.0.2:9", max_concurrent: 1, queue: {queue}}}
aliases:
  t/chat: {{chain: [local/m]}}
"""


class Rig:
    def __init__(self, tmp: Path, wait: str = "30s", depth: int = 2) -> None:
        self.plan: RuntimePlan = load_plan(
            compile_text(tmp, CONFIG.format(queue=f"{{max_waiting: {depth}, max_wait: {wait}}}")), {}
        )
        self.now = 100.0
        self.facts = LiveFacts()
        telemetry = TelemetryBook()
        telemetry.configure(targets(self.plan))
        self.speeds = SpeedBook()
        self.slots = MemorySlots()
        self.slots.configure(self.plan.workers)
        occupancy = backend_occupancy(self.slots, lambda: self.plan.workers)
        self.scorer = Scorer(self.facts, telemetry, self.speeds, occupancy, clock=lambda: self.now)
        self.line = FleetLine(
            self.slots,
            self.scorer,
            lambda: self.plan.routing,
            lambda: self.plan.workers,
            clock=lambda: self.now,
        )
        self.candidate = self.plan.candidates["local/m"]
        self.routes = self.candidate.routes

    async def hold(self, worker: str) -> Lease:
        """A slot on ``worker`` taken as the slot guard takes it (wrapped: its release walks the line)."""
        lease = await self.slots.acquire(worker, "m", 1, wait=False)
        assert lease is not None
        return self.line.wrap(lease)

    def join(self, turn: Turn = COMMON) -> asyncio.Task[tuple[str | None, Lease]]:
        async def wait() -> tuple[str | None, Lease]:
            route, lease = await self.line.wait(self.candidate, self.routes, self.routes[0], turn=turn)
            return route.worker, lease

        return asyncio.get_running_loop().create_task(wait())

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Let the loop run (the line's walks are tasks) until ``predicate`` holds."""
        await until(predicate, "the line to get there", pause_s=0)


def run(test: Callable[[Rig], Awaitable[None]], tmp: Path, wait: str = "30s", depth: int = 2) -> None:
    asyncio.run(test(Rig(tmp, wait, depth)))


def test_a_waiter_takes_the_first_slot_that_frees_on_any_worker_in_arrival_order(tmp_path: Path) -> None:
    async def test(rig: Rig) -> None:
        on_a, on_b = await rig.hold("a"), await rig.hold("b")
        first, second = rig.join(), rig.join()
        await rig.until(lambda: rig.line.waiting("local/m") == 2)
        await on_b.release()  # b frees first: the first waiter goes there, bound to neither on arrival
        worker, lease = await first
        assert worker == "b"
        assert not second.done()
        await on_a.release()
        assert (await second)[0] == "a"
        assert rig.line.report() == {}
        await lease.release()
        await lease.release()  # idempotent: the slot is given back once
        assert rig.slots.local("b").in_use == 0

    run(test, tmp_path)


def test_a_full_line_and_a_wait_past_max_wait_are_answered_429(tmp_path: Path) -> None:
    async def test(rig: Rig) -> None:
        await rig.hold("a")
        await rig.hold("b")
        waiters = [rig.join(), rig.join()]
        await rig.until(lambda: rig.line.waiting("local/m") == 2)
        with pytest.raises(
            SlotUnavailable,
            match=r"^no worker of local/m has a free slot and its line is full \(2 waiting\)$",
        ):
            await rig.line.wait(rig.candidate, rig.routes, rig.routes[0])
        for waiter in waiters:
            with pytest.raises(SlotUnavailable, match=r"^no worker of local/m had a free slot within 0.01s"):
                await waiter
        assert rig.line.report() == {}

    run(test, tmp_path, wait="10ms")


def test_a_waiter_that_goes_leaves_the_line_and_strands_no_slot(tmp_path: Path) -> None:
    async def test(rig: Rig) -> None:
        held = await rig.hold("a")
        await rig.hold("b")
        gone, stays = rig.join(), rig.join()
        await rig.until(lambda: rig.line.waiting("local/m") == 2)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert rig.line.waiting("local/m") == 1
        await held.release()
        assert (await stays)[0] == "a"
        assert rig.slots.local("a").in_use == 1

    run(test, tmp_path)


def test_a_waiter_holds_out_for_the_loaded_worker_until_the_wait_it_expected_has_passed(
    tmp_path: Path,
) -> None:
    async def test(rig: Rig) -> None:
        rig.facts.put_loaded("local@a", {"m:latest": 4096}, 1.0)
        rig.facts.put_loaded("local@b", {}, 1.0)
        rig.speeds.observe(
            "local@a", "m:latest", {"eval_count": 10, "eval_duration": 10**9, "total_duration": 10**9}
        )  # 1 s a request on a, where it is loaded; a load on b: 3 s (not learned)
        held = await rig.hold("a")
        waiter = rig.join()
        await rig.until(lambda: rig.scorer.last.get("b") is not None)
        assert rig.scorer.last["a"].expected_s == 1.0
        assert rig.scorer.last["b"].expected_s == 3.0
        rig.line.changed()  # b stays free, but a's slot is expected sooner than b's load
        await asyncio.sleep(0)
        assert not waiter.done()
        rig.now += 1.5  # a's request runs longer than learned: the hold-out is over
        rig.line.changed()
        worker, lease = await waiter
        assert worker == "b"
        assert rig.line.dispatched == 1
        await lease.release()
        await held.release()

    run(test, tmp_path)


def test_the_line_hands_slots_over_in_fair_order_batch_last(tmp_path: Path) -> None:
    """Six waiters of a flooding tenant, one batch waiter, then two of a quiet tenant, both workers
    full: the quiet tenant's i-th waiter starts among the first 2i (its share; the line's ties go by
    arrival, so the flooder's first), the batch waiter last, the flooder keeps every other slot."""
    flood, quiet, bulk = Turn("flood"), Turn("quiet"), Turn("bulk", batch=True)

    async def test(rig: Rig) -> None:
        held = [await rig.hold("a"), await rig.hold("b")]
        names: dict[asyncio.Task[tuple[str | None, Lease]], str] = {}
        arrivals = [(flood, f"f{i}") for i in range(6)] + [(bulk, "b0"), (quiet, "q0"), (quiet, "q1")]
        for count, (turn, name) in enumerate(arrivals, 1):
            names[rig.join(turn)] = name
            await rig.until(lambda count=count: rig.line.waiting("local/m") == count)
        order: list[str] = []
        while names:
            await held.pop(0).release()
            await rig.until(lambda: any(task.done() for task in names))
            task = next(task for task in names if task.done())
            order.append(names.pop(task))
            held.append((await task)[1])
        assert order == ["f0", "q0", "f1", "q1", "f2", "f3", "f4", "f5", "b0"]
        for lease in held:
            await lease.release()

    run(test, tmp_path, depth=16)


def test_a_full_line_pushes_out_its_last_waiter_for_an_earlier_place(tmp_path: Path) -> None:
    async def test(rig: Rig) -> None:
        await rig.hold("a")
        await rig.hold("b")
        kept, last = rig.join(Turn("flood")), rig.join(Turn("flood"))
        await rig.until(lambda: rig.line.waiting("local/m") == 2)
        quiet = rig.join(Turn("quiet"))
        with pytest.raises(SlotUnavailable, match=r"a request of a tenant with less waiting took"):
            await last
        await rig.until(lambda: rig.line.waiting("local/m") == 2)
        with pytest.raises(SlotUnavailable, match=r"its line is full \(2 waiting\)$"):
            await rig.line.wait(rig.candidate, rig.routes, rig.routes[0], turn=Turn("flood"))
        assert not kept.done()
        assert not quiet.done()
        kept.cancel()
        quiet.cancel()

    run(test, tmp_path)
