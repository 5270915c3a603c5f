"""The ``--workers N`` supervisor's respawn policy, with stand-in processes and an injected clock."""

from __future__ import annotations

import itertools
from typing import Any

from interlock.runtime.app.server import Backoff, Supervisor


class Process:
    """Stands in for a spawned worker: alive until the test says it died."""

    pids = itertools.count(100)

    def __init__(self) -> None:
        self.pid = next(self.pids)
        self.alive = True
        self.exitcode: int | None = None

    def is_alive(self) -> bool:
        return self.alive

    def die(self) -> None:
        self.alive, self.exitcode = False, 1


class Rig(Supervisor):
    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(1, print, (), clock=lambda: self.now)
        self.spawned: list[Process] = []
        self.processes = [self._spawn()]
        self.started_at, self.due, self.backoff = [0.0], [None], [Backoff()]

    def _spawn(self) -> Any:
        process = Process()
        self.spawned.append(process)
        return process

    def at(self, now: float) -> Rig:
        self.now = now
        self._tend(0)
        return self


def test_a_worker_that_ran_a_while_is_replaced_at_once() -> None:
    rig = Rig()
    rig.spawned[-1].die()
    assert len(rig.at(60.0).spawned) == 2


def test_a_worker_that_keeps_dying_is_replaced_ever_more_slowly() -> None:
    rig = Rig()
    starts = []
    now = 0.0
    for _ in range(8):  # each replacement dies at once, as one that cannot load its plan would
        rig.spawned[-1].die()
        count = len(rig.spawned)
        while len(rig.spawned) == count:
            now += 0.25  # exact in binary: no drift
            rig.at(now)
        starts.append(now)
    gaps = [b - a for a, b in itertools.pairwise([0.0, *starts])]
    assert gaps == [0.75, 1.25, 2.25, 4.25, 8.25, 16.25, 30.25, 30.25]  # 0.5 s doubling to 30 s, plus a tick
    rig.now += 20.0  # this one lives past quick_s: the streak is over
    rig.spawned[-1].die()
    assert len(rig.at(rig.now).spawned) == 10


def test_backoff_doubles_and_resets() -> None:
    backoff = Backoff(quick_s=10, first_s=0.5, max_s=4)
    assert [backoff.delay(1) for _ in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert backoff.delay(11) == 0.0
    assert backoff.delay(1) == 0.5
