"""The slot file of ``--workers N`` (``runtime/state/shared.py``) with real processes: spawned worker
processes take slots in it beside the supervisor's ``SlotServer`` (a thread of this process), as
``interlock serve --workers N`` runs them."""

from __future__ import annotations

import asyncio
import fcntl
import multiprocessing
import os
import signal
import threading
from multiprocessing.sharedctypes import Synchronized, SynchronizedArray
from multiprocessing.synchronize import Event

import pytest

from interlock.runtime.loaded.tables import WorkerLimits
from interlock.runtime.state.base import Lease
from interlock.runtime.state.embedded import EmbeddedLease, EmbeddedSlots, SlotServer
from interlock.runtime.state.shared import supported, table_path
from tests.waiting import PATIENCE_S, until, wait_until

pytestmark = pytest.mark.skipif(not supported(), reason="the slot file needs open-file-description locks")

SPAWN = multiprocessing.get_context("spawn")  # as the supervisor starts its workers
# max_wait only bounds a failure here (no test waits it out): long, so a busy machine never expires a wait
THREE = {"box": WorkerLimits("box", "local", None, {}, 3, {}, (), max_waiting=64, max_wait_s=60.0)}
TWO = {"box": WorkerLimits("box", "local", None, {}, 2, {}, (), max_waiting=64, max_wait_s=60.0)}
PER_MODEL = {"a": 2, "b": 2}  # on a worker of 3: either model alone cannot fill it
SEEN = ("in use", "a", "b", "most in use", "most a", "most b", "leases", "in the file")


def hammer(path: str, tasks: int, rounds: int, seen: SynchronizedArray[int]) -> None:
    """One worker process: ``tasks`` requests at a time, each taking a slot ``rounds`` times (waiting
    for it, or not), counting in ``seen`` what is held while it holds it."""

    async def requests(task: int, backend: EmbeddedSlots) -> None:
        for i in range(rounds):
            model = "ab"[(task + i) % 2]
            lease = await backend.acquire("box", model, PER_MODEL[model], wait=i % 3 != 0)
            if lease is None:
                continue
            count(model, +1)
            await asyncio.sleep(0.001)  # hold it a moment, so holders overlap
            count(model, -1)
            await lease.release()

    def count(model: str, step: int) -> None:
        with seen.get_lock():
            seen[0] += step
            seen[1 + "ab".index(model)] += step
            for i in range(3):
                seen[3 + i] = max(seen[3 + i], seen[i])
            seen[6] += step > 0

    async def main() -> None:
        backend = EmbeddedSlots(path)
        backend.configure(THREE)
        await backend.start()
        if backend._file is not None:
            with seen.get_lock():
                seen[7] += 1
        await asyncio.gather(*(requests(task, backend) for task in range(tasks)))
        await backend.close()

    asyncio.run(main())


def test_processes_hammering_the_table_never_exceed_a_limit(server: SlotServer) -> None:
    seen = SPAWN.Array("i", len(SEEN))
    workers = [SPAWN.Process(target=hammer, args=(server.path, 4, 60, seen)) for _ in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(PATIENCE_S)
    assert [process.exitcode for process in workers] == [0, 0, 0, 0]
    counts = dict(zip(SEEN, seen[:], strict=True))
    assert counts["in the file"] == 4  # every process took its slots in the file (and queued past it)
    assert counts["leases"] > 0
    most = (counts["most in use"], counts["most a"], counts["most b"])
    assert most == (3, 2, 2), counts  # full at times, never over
    assert (counts["in use"], counts["a"], counts["b"]) == (0, 0, 0)
    wait_until(lambda: server.table.pools["box"].held() == (0, {}), what="every slot back")


def hold_two(path: str, held: Event, pid: Synchronized[int]) -> None:
    """A worker process that takes two slots and hangs on to them until it is killed."""

    async def main() -> None:
        backend = EmbeddedSlots(path)
        backend.configure(TWO)
        await backend.start()
        leases = [await backend.acquire("box", model, 2, wait=False) for model in ("m", "x")]
        assert all(isinstance(lease, Lease) for lease in leases)
        assert backend._file is not None  # taken in the file, not by the server
        pid.value = os.getpid()
        held.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def test_a_killed_process_gives_its_slots_back_to_the_waiting(server: SlotServer) -> None:
    held, pid = SPAWN.Event(), SPAWN.Value("i", 0)
    doomed = SPAWN.Process(target=hold_two, args=(server.path, held, pid))
    doomed.start()
    try:
        assert held.wait(PATIENCE_S)

        async def scenario() -> None:
            other = EmbeddedSlots(server.path)
            other.configure(TWO)
            await other.start()
            assert await other.acquire("box", "y", 2, wait=False) is None  # its two count here
            queued = asyncio.create_task(other.acquire("box", "y", 2, wait=True))
            await until(lambda: server.table.pools["box"].waiters, "the queue")
            os.kill(pid.value, signal.SIGKILL)
            lease = await asyncio.wait_for(queued, PATIENCE_S)  # handed one of the dead process's slots
            assert lease is not None
            assert (await other.report())["box"].per_model == {"y": 1}
            await lease.release()
            await until(lambda: server.table.pools["box"].held() == (0, {}), "every slot back")
            await other.close()

        asyncio.run(scenario())
    finally:
        doomed.kill()
        doomed.join(PATIENCE_S)


async def taker(server: SlotServer) -> EmbeddedSlots:
    backend = EmbeddedSlots(server.path)
    backend.configure(TWO)
    await backend.start()
    await until(lambda: "box" in server.table.pools, "the server to hear the bounds")
    return backend


def test_a_give_goes_through_while_another_process_holds_the_workers_lock(server: SlotServer) -> None:
    async def scenario() -> None:
        holder = await taker(server)
        lease = await holder.acquire("box", "m", 2, wait=False)
        assert isinstance(lease, EmbeddedLease)
        assert lease.cell is not None  # taken in the file
        # another process inside its take (or stopped there): it holds the worker's lock
        other = os.open(table_path(server.path), os.O_RDWR)
        try:
            fcntl.fcntl(other, fcntl.F_OFD_SETLK, lease.cell.lock)
            done = threading.Event()
            giving = threading.Thread(target=lambda: (asyncio.run(lease.release()), done.set()), daemon=True)
            giving.start()
            assert done.wait(PATIENCE_S)  # a give takes no lock: it never waits behind a taker
        finally:
            os.close(other)  # the lock goes with the file description
        assert holder.local("box").in_use == 0
        await until(lambda: server.table.pools["box"].held() == (0, {}), "the slot back")
        await holder.close()

    asyncio.run(scenario())


def test_a_slot_given_back_unseen_still_goes_to_the_waiter(server: SlotServer) -> None:
    async def scenario() -> None:
        holder, other = await taker(server), await taker(server)
        leases = [await holder.acquire("box", "m", 2, wait=False) for _ in range(2)]
        assert all(isinstance(lease, EmbeddedLease) and lease.cell for lease in leases)
        queued = asyncio.create_task(other.acquire("box", "m", 2, wait=True))
        await until(lambda: server.table.pools["box"].waiters, "the queue")
        # a give whose read of the queue's length came before the join's store landed: it lowers
        # the row and does not tell the server; the server's next look hands the slot over
        given = leases[0]
        assert isinstance(given, EmbeddedLease)
        assert given.file is not None
        assert given.cell is not None
        given.file.give(given.cell)
        lease = await asyncio.wait_for(queued, PATIENCE_S)
        assert lease is not None
        assert server.table.pools["box"].held() == (2, {"m": 2})
        await lease.release()
        await leases[1].release()
        await until(lambda: server.table.pools["box"].held() == (0, {}), "every slot back")
        await holder.close()
        await other.close()

    asyncio.run(scenario())
