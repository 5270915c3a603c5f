"""The embedded backend for ``--workers N``: the supervisor owns the queue, workers take free slots in a file.

``SlotServer`` runs in the supervisor process (an event loop on a thread of its own) and holds the host's
``SlotTable``: the same fair queue (``fair.py``), timeouts and ``Retry-After`` as one process has, its
pools (``shared.SharedPool``) counting every process's slots in the slot file (``shared.py``) it
creates beside its socket. ``EmbeddedSlots`` is the worker's side: a row of that file, where it takes a
free slot and gives it back with no message (the common case: one byte-range lock, no round trip), and
one Unix-socket connection, requests multiplexed by id, one line of JSON each way, for the rest: a
request that finds its worker full (or others already waiting) queues with the server, which hands it
a slot in fair order when one comes back.

Wire (one JSON array a line): worker -> supervisor ``["w", row]`` (its row of the file, once
connected), ``["c", {worker: [max_concurrent, max_waiting, max_wait_s]}]`` (bounds), ``["a", id,
worker, model, limit, wait]`` (acquire; a waiting request with a tenant or a priority class adds
``tenant, weight, batch``: its place in the fair queue), ``["r", id]`` (release a slot the server
handed out, or give up waiting; no answer), ``["f", worker]`` (a slot given back in the file while the
worker's queue had waiters: hand it over; no answer), ``["s", id]`` (report); supervisor -> worker
``[id, "ok"]``, ``[id, "no"]`` (none free, not waiting), ``[id, "busy", retry_after, message]``,
``[id, report]``.
Caller limits (``counters.py``): ``["k", id, [[name, rpm, tpm, concurrent], ...], hold, least]``
(reserve), answered ``[id, null, tokens reserved]`` (admitted) or ``[id, [name, limit, value,
retry_after]]``; ``["d", tokens, [names]]``
(done, no answer). Credits reservations: ``["q", id, [[name, room, asked, hold], ...]]`` (claim),
answered ``[id, null, [granted hold, ...]]`` (held) or ``[id, [index, held]]``; ``["u", id]``
(unclaim what that claim holds, if anything; no answer). A connection that ends gives back the
requests it still had in flight, and their holds.
Either way ``["h", endpoint, open_for_s]``: a worker found an endpoint down (or back, 0); the server
passes it on to the other workers, so one worker's discovery that a box died spares the others; and
``["hc", candidate, open_for_s]`` the same for a candidate's circuit (opened until its trial, or
half-opened: 0).

A worker that dies gives everything back: what the server handed it and its queue places when the
kernel closes its socket, its row of the file when the kernel drops the row's lock (``shared.py``: the
server sees the lock free and zeroes the row). Caller limits and credits still go by the socket, one
round trip each where a caller has them (``bench/state_backends.py`` measures both).

If the connection is lost (the supervisor is gone), the worker falls back to its own in-process table,
says so in the log and in ``interlock_state_degraded``, and tries to reconnect at most once a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from interlock.runtime.base.errors import SlotUnavailable
from interlock.runtime.loaded.callers import COMMON, Budget, Refusal, Turn
from interlock.runtime.loaded.tables import WorkerLimits
from interlock.runtime.state.base import Lease, SlotBackend, SlotReport, StateUnreachable
from interlock.runtime.state.counters import (
    CallerCounters,
    Claim,
    Held,
    MemoryCounters,
    Short,
    granted,
)
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.state.pool import SlotLease, SlotPool, SlotTable
from interlock.runtime.state.shared import (
    QUEUE,
    RECLAIM_EVERY_S,
    TAKEN,
    Cell,
    SharedPool,
    SlotFile,
    supported,
    table_path,
)
from interlock.runtime.state.spare import Spare

if TYPE_CHECKING:
    from interlock.runtime.state.base import SharedHealth

log = logging.getLogger("interlock.state")

RECONNECT_EVERY_S = 1.0


# -- the supervisor's side -------------------------------------------------------------------------


class SlotServer:
    """The host's slot table on a Unix socket; ``start`` runs it on a thread, ``stop`` ends it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.table = SlotTable(self._pool)
        self.file: SlotFile | None = None  # the slot counts workers take without a message (``shared.py``)
        self.counters = MemoryCounters()  # the host's caller limits (keys' and tenants' rates)
        self.connections = 0  # open worker connections
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None

    def start(self) -> None:
        ready = threading.Event()
        failed: list[BaseException] = []

        def main() -> None:
            async def serve() -> None:
                self._loop = asyncio.get_running_loop()
                self._stopping = asyncio.Event()
                try:
                    if supported():
                        self.file = SlotFile.create(table_path(self.path))
                    server = await asyncio.start_unix_server(self._serve, path=self.path)
                except OSError as exc:
                    failed.append(exc)
                    ready.set()
                    return
                ready.set()
                reaper = self._loop.create_task(self._reap())
                async with server:
                    await self._stopping.wait()
                reaper.cancel()

            asyncio.run(serve())

        self._thread = threading.Thread(target=main, name="interlock-slot-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failed:
            raise failed[0]

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(5)
        if self.file is not None:
            self.file.close()

    def _pool(self, name: str, max_concurrent: int, max_waiting: int, max_wait_s: float) -> SlotPool:
        return SharedPool(name, max_concurrent, max_waiting, max_wait_s, shared=self.file)

    async def _reap(self) -> None:
        """Give back the slots of workers that died (their rows in the file), however they died."""
        while True:
            await asyncio.sleep(RECLAIM_EVERY_S)
            self._reclaim(None)

    def _reclaim(self, row: int | None) -> None:
        """Zero the rows of dead processes (``row``: that one), then hand what came back to waiters."""
        if self.file is not None and self.file.reclaim(row):
            self._wake_all()

    def _wake_all(self) -> None:
        for pool in self.table.pools.values():
            if isinstance(pool, SharedPool):
                pool.wake()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One worker process: everything it holds or waits for goes when its connection does."""
        link = _Link(self, writer)
        self.connections += 1
        self._writers.add(writer)
        try:
            while line := await reader.readline():
                message = orjson.loads(line)
                handle = _OPS.get(message[0])  # an op this server does not know is passed over
                if handle is not None and (pending := handle(link, message)) is not None:
                    await pending
        except (ConnectionError, ValueError, TypeError, IndexError) as exc:
            log.error("slot server: dropping a worker connection after a bad message (%s)", exc)
        finally:
            self.connections -= 1
            self._writers.discard(writer)
            await link.give_back()
            writer.close()


class _Link:
    """One worker's connection to the slot server: what it holds and waits for, and one method per op
    of the wire (``_OPS``); ``give_back`` returns all of it when the connection ends."""

    def __init__(self, server: SlotServer, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.writer = writer
        self.held: dict[int, SlotLease] = {}
        self.waiting: dict[int, asyncio.Task[None]] = {}
        self.in_flight: dict[str, int] = {}  # caller budgets this connection holds, by name
        self.holding: dict[str, int] = {}  # tokens its requests in flight reserved, by budget name
        self.claimed: dict[int, Held] = {}  # credits its requests in flight hold, by claim id
        self.row = 0  # its row in the slot file (0: none)

    def send(self, message: Any) -> None:
        if not self.writer.is_closing():
            self.writer.write(orjson.dumps(message) + b"\n")

    def acquire(self, message: list[Any]) -> None:
        """``a``: a free slot now, ``no``, or (when it may wait) a place in the fair queue."""
        _, ident, worker, model, limit, wait, *place = message
        pool = self.server.table.pools.get(worker)
        if pool is None:  # bounds not sent yet: cannot happen with a well-behaved worker
            self.send([ident, "busy", 1, f"worker {worker} is not configured in the slot server"])
            return
        lease = pool.try_acquire(model, limit)
        if lease is not None:
            self.held[ident] = lease
            self.send([ident, "ok"])
        elif not wait:
            self.send([ident, "no"])
        else:
            turn = Turn(str(place[0]), float(place[1]), bool(place[2])) if place else COMMON
            task = asyncio.get_running_loop().create_task(
                self._wait_for_slot(ident, pool, model, limit, turn)
            )
            self.waiting[ident] = task

    async def _wait_for_slot(self, ident: int, pool: SlotPool, model: str, limit: int, turn: Turn) -> None:
        try:
            lease = await pool.acquire(model, limit, turn)
        except SlotUnavailable as exc:
            self.send([ident, "busy", exc.retry_after, exc.message])
            return
        finally:
            self.waiting.pop(ident, None)
        self.held[ident] = lease
        self.send([ident, "ok"])

    def release(self, message: list[Any]) -> None:
        """``r``: a slot handed out given back, or a wait given up."""
        ident = message[1]
        lease = self.held.pop(ident, None)
        if lease is not None:
            lease.release()
        else:
            pending = self.waiting.pop(ident, None)
            if pending is not None:
                pending.cancel()

    def freed(self, message: list[Any]) -> None:
        """``f``: a worker gave a slot back in the file while its queue had waiters."""
        pool = self.server.table.pools.get(message[1])
        if isinstance(pool, SharedPool):
            pool.wake()

    def bounds(self, message: list[Any]) -> None:
        """``c``: each worker's bounds."""
        for worker, (max_concurrent, max_waiting, max_wait_s) in message[1].items():
            self.server.table.bound(worker, max_concurrent, max_waiting, max_wait_s)

    def own_row(self, message: list[Any]) -> None:
        """``w``: its row; claiming it zeroed whatever a dead owner had left there."""
        self.row = int(message[1])
        self.server._wake_all()

    def report(self, message: list[Any]) -> None:
        """``s``: every pool's report."""
        self.send([message[1], {name: _report(pool) for name, pool in self.server.table.pools.items()}])

    async def reserve(self, message: list[Any]) -> None:
        """``k``: reserve under caller limits; admitted (tokens reserved) or refused (by which limit)."""
        budgets = [Budget(str(b[0]), int(b[1]), int(b[2]), int(b[3])) for b in message[2]]
        given = await self.server.counters.reserve(budgets, int(message[3]), int(message[4]))
        if not isinstance(given, Refusal):
            for b in budgets:
                self.in_flight[b.name] = self.in_flight.get(b.name, 0) + 1
                self.holding[b.name] = self.holding.get(b.name, 0) + given
            self.send([message[1], None, given])
        else:
            r = given
            self.send([message[1], [r.budget, r.limit, r.value, r.retry_after_s]])

    async def done(self, message: list[Any]) -> None:
        """``d``: a request under caller limits ended (only budgets this connection holds count)."""
        names = [str(n) for n in message[2] if self.in_flight.get(str(n), 0) > 0]
        released = int(message[3])
        for name in names:
            self.in_flight[name] -= 1
            self.holding[name] = max(0, self.holding.get(name, 0) - released)
        budgets = [Budget(n, 0, 0, 0) for n in names]
        await self.server.counters.done(budgets, int(message[1]), released)

    async def claim(self, message: list[Any]) -> None:
        """``q``: claim credits; held (what each claim holds) or short (which one, and what it held)."""
        claims = [Claim(str(c[0]), int(c[1]), int(c[2]), int(c[3])) for c in message[2]]
        answer = await self.server.counters.claim(claims)
        if isinstance(answer, Held):
            self.claimed[int(message[1])] = answer
            self.send([message[1], None, [c.hold for c in answer.claims]])
        else:
            self.send([message[1], [answer.index, answer.held]])

    async def unclaim(self, message: list[Any]) -> None:
        """``u``: give a claim back (one refused, or not this connection's, has nothing to give back)."""
        taken = self.claimed.pop(int(message[1]), None)
        if taken is not None:
            await self.server.counters.unclaim(taken)

    def tell_others(self, message: list[Any]) -> None:
        """``h``, ``hc``: an endpoint (a candidate) found down or back: pass it on to the other workers."""
        line = orjson.dumps(message) + b"\n"
        for other in self.server._writers:
            if other is not self.writer and not other.is_closing():
                other.write(line)

    async def give_back(self) -> None:
        """The connection ended: its waits, slots, caller-limit holds, credits and row go back."""
        counters = self.server.counters
        for pending in list(self.waiting.values()):
            pending.cancel()
        for lease in self.held.values():
            lease.release()
        self.held.clear()
        for name, count in self.in_flight.items():  # a dead worker's requests are in flight no more,
            for index in range(count):  # nor are the tokens they held
                tokens = self.holding.get(name, 0) if index == 0 else 0
                await counters.done([Budget(name, 0, 0, 0)], 0, tokens)
        for taken in self.claimed.values():
            await counters.unclaim(taken)
        if self.row:
            self.server._reclaim(self.row)  # found dead now, or else by ``_reap`` once its process is gone


_OPS: dict[str, Callable[[_Link, list[Any]], Awaitable[None] | None]] = {
    "a": _Link.acquire,
    "r": _Link.release,
    "f": _Link.freed,
    "c": _Link.bounds,
    "w": _Link.own_row,
    "s": _Link.report,
    "k": _Link.reserve,
    "d": _Link.done,
    "q": _Link.claim,
    "u": _Link.unclaim,
    "h": _Link.tell_others,
    "hc": _Link.tell_others,
}


def _report(pool: SlotPool) -> list[Any]:
    in_use, per_model = pool.held()
    return [in_use, per_model, len(pool.waiters), pool.rejected]


# -- the worker's side -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Share:
    """This process's part of one worker's slots (for metrics: the parts sum to the whole)."""

    in_use: int = 0
    per_model: dict[str, int] = field(default_factory=dict)
    waiting: int = 0
    rejected: int = 0


class EmbeddedLease(Lease):
    """A slot taken in the slot file (``cell``: where, in ``file``), or handed out by the server
    (``ident``: its name for it there)."""

    __slots__ = ("backend", "cell", "file", "ident", "model", "released", "share")

    def __init__(
        self,
        backend: EmbeddedSlots,
        share: _Share,
        model: str,
        ident: int,
        cell: Cell | None,
        file: SlotFile | None,
    ) -> None:
        self.backend, self.share, self.model = backend, share, model
        self.ident, self.cell, self.file = ident, cell, file
        self.released = False
        share.in_use += 1
        share.per_model[model] = share.per_model.get(model, 0) + 1

    async def release(self) -> None:
        if self.released:
            return
        self.released = True
        share = self.share
        share.in_use -= 1
        left = share.per_model[self.model] - 1
        if left:
            share.per_model[self.model] = left
        else:
            del share.per_model[self.model]
        cell = self.cell
        if cell is None:
            self.backend._send(["r", self.ident])
        elif self.file is not None and self.file.give(cell):  # waiters: the server hands it over
            self.backend._send(["f", cell.worker])


class EmbeddedSlots(SlotBackend):
    """A worker process's client of the supervisor's ``SlotServer``."""

    scope = "host"

    def __init__(self, path: str) -> None:
        self.path = path
        self.fallback = MemorySlots()
        self.fallbacks = 0  # times the connection was lost (or could not be made)
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._replies: dict[int, asyncio.Future[list[Any]]] = {}
        self._ids = itertools.count(1)
        self._bounds: dict[str, list[float]] = {}
        self._shares: dict[str, _Share] = {}
        self._retry_at = 0.0
        self._closing = False
        self._health: SharedHealth | None = None
        self._file: SlotFile | None = None  # the server's slot file, this process's row in it
        self._opened = False  # tried to open it (once: a row is this process's for its life)
        self._entries: dict[str, int | None] = {}  # configured workers' entries (None: no room)
        self._cells: dict[tuple[str, str], Cell | None] = {}  # (worker, model): where in the file

    @property
    def degraded(self) -> bool:
        return self._writer is None and not self._closing

    def configure(self, workers: Mapping[str, WorkerLimits]) -> None:
        self.fallback.configure(workers)
        for name, w in workers.items():
            self._bounds[name] = [w.max_concurrent, w.max_waiting, w.max_wait_s]
            self._shares.setdefault(name, _Share())
        self._bound()
        self._send(["c", self._bounds])

    def _bound(self) -> None:
        """The workers' ``max_concurrent`` in the file (the server hears them too, for its queues)."""
        file = self._file
        if file is None:
            return
        for name, (max_concurrent, _, _) in self._bounds.items():
            index = file.pool(name)
            if index is not None:
                file.bound(index, int(max_concurrent))
                self._entries[name] = index
            elif name not in self._entries:
                self._entries[name] = None
                log.warning("slot file: no room for worker %s: its slots go by the socket", name)

    def share_health(self, book: SharedHealth) -> None:
        """Tell the other workers (through the supervisor) when an endpoint is found down or back."""
        self._health = book
        book.listener = lambda label, open_for_s: self._send(["h", label, open_for_s])
        book.candidate_listener = lambda cid, open_for_s: self._send(["hc", cid, open_for_s])

    async def start(self) -> None:
        await self._connect()

    def _new_counters(self) -> CallerCounters:
        return EmbeddedCounters(self)

    async def close(self) -> None:
        self._closing = True
        file, self._file = self._file, None
        if file is not None:  # first: the server reclaims the row when it sees the connection end
            file.close()
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await self._reader_task

    async def acquire(
        self, worker: str, model: str, limit: int, *, wait: bool, turn: Turn = COMMON
    ) -> Lease | None:
        file = self._file
        if file is not None and self._writer is not None:  # the file, unless the server is gone
            try:
                cell = self._cells[(worker, model)]
            except KeyError:
                cell = self._cell(file, worker, model)
            if cell is not None:
                taken = file.take(cell, limit)
                if taken == TAKEN:
                    return EmbeddedLease(self, self._shares[worker], model, 0, cell, file)
                if not wait and taken != QUEUE:
                    return None  # full; with waiters ahead, the server says (a slot may fit this model)
        if self._writer is None and not await self._reconnect():
            return await self.fallback.acquire(worker, model, limit, wait=wait, turn=turn)
        ident = next(self._ids)
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._replies[ident] = future
        share = self._shares[worker]
        share.waiting += 1
        if turn is COMMON or not wait:
            self._send(["a", ident, worker, model, limit, wait])
        else:
            self._send(["a", ident, worker, model, limit, wait, turn.tenant, turn.weight, turn.batch])
        try:
            reply = await future
        except StateUnreachable:
            return await self.fallback.acquire(worker, model, limit, wait=wait, turn=turn)
        except BaseException:  # cancelled (client gone): give back whatever the server settles on
            self._replies.pop(ident, None)
            self._send(["r", ident])
            raise
        finally:
            share.waiting -= 1
        status = reply[1]
        if status == "ok":
            return EmbeddedLease(self, share, model, ident, None, None)
        if status == "no":
            return None
        share.rejected += 1
        raise SlotUnavailable(str(reply[3]), retry_after=int(reply[2]))

    def _cell(self, file: SlotFile, worker: str, model: str) -> Cell | None:
        """Where ``model``'s slots on ``worker`` are in the file (entries added if new); None: the
        server's to count."""
        if worker not in self._entries:  # not configured: asked of the server, which says so
            return None
        pool = self._entries[worker]
        index = file.model(pool, model) if pool is not None else None
        cell = file.cell(worker, pool, index) if pool is not None and index is not None else None
        if pool is not None and index is None:
            log.warning("slot file: no room for model %s on %s: its slots go by the socket", model, worker)
        self._cells[(worker, model)] = cell
        return cell

    def waiting(self, worker: str) -> int:
        share = self._shares.get(worker)
        return (share.waiting if share else 0) + self.fallback.waiting(worker)

    def local(self, worker: str) -> SlotReport:
        share = self._shares.get(worker) or _Share()
        spare = self.fallback.local(worker)
        per_model = dict(share.per_model)
        for model, n in spare.per_model.items():
            per_model[model] = per_model.get(model, 0) + n
        return SlotReport(
            share.in_use + spare.in_use,
            per_model,
            share.waiting + spare.waiting,
            share.rejected + spare.rejected,
        )

    async def report(self) -> Mapping[str, SlotReport]:
        if self._writer is None and not await self._reconnect():
            return await self.fallback.report()
        ident = next(self._ids)
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._replies[ident] = future
        self._send(["s", ident])
        try:
            reply = await future
        except StateUnreachable:
            return await self.fallback.report()
        finally:
            self._replies.pop(ident, None)
        return {name: SlotReport(r[0], r[1], r[2], r[3]) for name, r in reply[1].items()}

    # -- the connection -----------------------------------------------------------------------------

    def _send(self, message: Any) -> None:
        writer = self._writer
        if writer is not None and not writer.is_closing():
            writer.write(orjson.dumps(message) + b"\n")

    async def _reconnect(self) -> bool:
        if self._closing or asyncio.get_running_loop().time() < self._retry_at:
            return False
        return await self._connect()

    async def _connect(self) -> bool:
        loop = asyncio.get_running_loop()
        try:
            reader, writer = await asyncio.open_unix_connection(self.path)
        except OSError as exc:
            self._retry_at = loop.time() + RECONNECT_EVERY_S
            self.fallbacks += 1
            log.error(
                "slot server %s unreachable (%s): limits hold per process until it is back",
                self.path,
                exc.strerror or exc,
            )
            return False
        self._writer = writer
        if not self._opened:
            self._opened = True
            self._file = SlotFile.open(table_path(self.path))
            self._bound()
        if self._file is not None:
            self._send(["w", self._file.row])
        self._send(["c", self._bounds])
        self._reader_task = loop.create_task(self._read(reader, writer))
        if self.fallbacks:
            log.warning("slot server %s reachable again: limits hold across processes", self.path)
        return True

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                reply = orjson.loads(line)
                if reply[0] == "h":
                    if self._health is not None:
                        self._health.apply_shared(str(reply[1]), float(reply[2]))
                    continue
                if reply[0] == "hc":
                    if self._health is not None:
                        self._health.apply_shared_candidate(str(reply[1]), float(reply[2]))
                    continue
                future = self._replies.pop(reply[0], None)
                if future is not None and not future.done():
                    future.set_result(reply)
        except (ConnectionError, ValueError) as exc:
            log.error("slot server connection broke: %s", exc)
        finally:
            if self._writer is writer:
                self._lost()

    def _lost(self) -> None:
        """The supervisor's table is gone: everything waiting on it falls back to this process's."""
        self._writer = None
        if self._closing:
            return
        self.fallbacks += 1
        self._retry_at = asyncio.get_running_loop().time() + RECONNECT_EVERY_S
        log.error("slot server %s lost: limits hold per process until it is back", self.path)
        replies, self._replies = self._replies, {}
        for future in replies.values():
            if not future.done():
                future.set_exception(StateUnreachable(self.path))


class EmbeddedCounters(CallerCounters):
    """Caller limits and credits holds in the supervisor's ``SlotServer`` (one count for the host);
    this process's own while the supervisor cannot be reached."""

    scope = "host"

    def __init__(self, backend: EmbeddedSlots) -> None:
        self.backend = backend
        self.spare = Spare()

    async def _ask(self, message: list[Any], undo: list[Any]) -> list[Any] | None:
        """The server's answer to ``message`` (its id at ``[1]``, set here; None: unreachable);
        cancelled: ``undo`` is sent (its id at ``[1]`` too, for a claim)."""
        backend = self.backend
        if backend._writer is None and not await backend._reconnect():
            return None
        ident = next(backend._ids)
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        backend._replies[ident] = future
        message[1] = ident
        backend._send(message)
        try:
            return await future
        except StateUnreachable:
            return None
        except BaseException:  # cancelled: whatever the server admitted goes back
            backend._replies.pop(ident, None)
            if undo[0] == "u":
                undo[1] = ident
            backend._send(undo)
            raise

    async def reserve(self, budgets: Sequence[Budget], hold: int = 0, least: int = 0) -> Refusal | int:
        rows = [[b.name, b.requests_per_minute, b.tokens_per_minute, b.max_concurrent] for b in budgets]
        reply = await self._ask(["k", 0, rows, hold, least], ["d", 0, [b.name for b in budgets], hold])
        if reply is None:
            return await self.spare.reserve(budgets, hold, least)
        if reply[1] is None:
            return int(reply[2])
        name, limit, value, wait = reply[1]
        return Refusal(str(name), str(limit), int(value), float(wait))

    async def done(self, budgets: Sequence[Budget], tokens: int, held: int = 0) -> None:
        if not await self.spare.done(budgets, tokens, held):
            self.backend._send(["d", tokens, [b.name for b in budgets], held])

    async def claim(self, claims: Sequence[Claim]) -> Held | Short:
        rows = [[c.name, c.room, c.asked, c.hold] for c in claims]
        reply = await self._ask(["q", 0, rows], ["u", 0])
        if reply is None:
            return await self.spare.claim(claims)
        if reply[1] is None:
            return Held(granted(claims, [int(hold) for hold in reply[2]]), int(reply[0]))
        return Short(int(reply[1][0]), int(reply[1][1]))

    async def unclaim(self, held: Held) -> None:
        if held.spare:
            await self.spare.counters.unclaim(held)
        else:
            self.backend._send(["u", held.ident])
