"""The host's slot counts in one shared file (``--workers N``): a row per process, a lock per worker.

The supervisor's ``SlotServer`` (``embedded.py``) creates the file beside its socket and keeps the fair
queue; each worker process maps the file and, while nobody waits on a worker, takes and gives back its
slots here: one byte-range lock, a sum and one add, no message. A worker whose slots are all taken
(or whose queue has waiters) asks the server, which queues it in fair order as before.

Invariants (what makes a count that several processes write trustworthy):

- **Each process writes only its own row** (row 0: the supervisor's, the slots its queue handed out);
  the count of a worker (or of one model on it) is the sum of the rows. A process killed at any point
  leaves its row as it was: each store is one aligned 8-byte write, so the row is never half-written.
- **Check and take are one step**: under the worker's lock (an open-file-description lock,
  ``F_OFD_SETLKW``, on one byte named by the worker's index), so no two processes both take the last
  slot. **Giving back takes no lock**: the process lowers its own row and reads the worker's queue
  length. A count that is falling can only be read too high, so a check that reads it meanwhile
  refuses at worst (its request queues with the server), never admits past the limit.
- **A waiter is never left beside a free slot**: the server publishes its queue's length before it
  looks at the counts, and a give lowers its row before it reads that length, so the give tells the
  server (it saw the waiter) or the server's look sees the slot free. The two take no lock in common,
  so a processor may let each read before the other's write lands: while anyone waits, the server
  looks again every ``RECHECK_S``, which catches such a slot.
- **A dead process's slots come back**: a row is owned by an OFD lock on its own byte, which the kernel
  drops when the process dies (however it dies: no robust-mutex dance, no lease to time out). The
  server finds such rows (when a worker's connection ends, and every ``RECLAIM_EVERY_S``) by taking
  that lock: it can only get it from a dead owner; it zeroes the row and wakes the queues. Until then
  the dead process's slots count as held: the limit is never exceeded, at worst under-used a moment.
- Entries (workers, models of a worker) are appended under a directory lock and never move; each
  process caches their indexes. A table that is full, a name too long or a platform without OFD locks
  leaves that worker or model to the server's socket (``embedded.py``'s round trip: slower, as safe).

Layout (native 8-byte integers): a header, the worker entries (``ENTRY`` cells: name length, the
worker's ``max_concurrent``, its queue's length, the name), the model entries (name length, worker
index, the name), a claimed flag per row, then the rows (a cell per worker, then a cell per model).
"""

from __future__ import annotations

import asyncio
import fcntl
import mmap
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from interlock.runtime.loaded.callers import Turn
from interlock.runtime.state.pool import SlotLease, SlotPool, Waiter

ROWS = 64  # processes that can take slots here at once (the supervisor and its workers)
POOLS = 512  # workers
MODELS = 4096  # (worker, model) pairs
ENTRY = 16  # cells: a worker's: length, max_concurrent, waiting, the name; a model's: length, worker, name
MAGIC, VERSION = 0x534C4F54, 1  # "SLOT"
RECLAIM_EVERY_S = 1.0  # the server's look for rows of dead processes (also when a connection ends)
RECHECK_S = 0.01  # the server's look for slots given back, while its queue has waiters

TAKEN, FULL, QUEUE = 1, 0, -1  # ``take``: a slot held; none free; waiters are ahead (ask the server)

_HEADER = 16  # cells: magic, version, rows, pools, models, pools used, models used, rows in use
_HIGH = 7
_POOL_DIR = _HEADER
_MODEL_DIR = _POOL_DIR + POOLS * ENTRY
_CLAIMED = _MODEL_DIR + MODELS * ENTRY
_COUNTS = _CLAIMED + ROWS
_STRIDE = POOLS + MODELS
_CELLS = _COUNTS + ROWS * _STRIDE
_LOCK_DIRECTORY = 1 << 20  # lock bytes (advisory: they name locks, they hold no data): a worker's is
_LOCK_ROW = 1 << 21  # its index; the directory's and each row's lie past every worker's

_OFD = hasattr(fcntl, "F_OFD_SETLKW")
_FLOCK = "hhqqi4x"  # struct flock: type, whence, start, len, pid (0: an OFD lock), padding


@dataclass(frozen=True, slots=True)
class _Directory:
    """One kind of entry: its first cell, the cells before a name, how many fit, the header cell that
    counts them, the entry's cell naming its worker (0: none, a worker's own entry)."""

    at: int
    head: int
    capacity: int
    used: int
    owner: int


_WORKERS = _Directory(_POOL_DIR, 3, POOLS, 5, 0)
_MODELS = _Directory(_MODEL_DIR, 2, MODELS, 6, 1)


def _flock(kind: int, byte: int) -> bytes:
    return struct.pack(_FLOCK, kind, os.SEEK_SET, byte, 1, 0)


@dataclass(frozen=True, slots=True)
class Cell:
    """Where one process takes and gives back one model's slots on one worker: the worker's lock, its
    entry's cells (``max_concurrent``, the queue's length), the worker's and the model's columns of
    counts, and this process's own cells in them. Settled once per pair (``SlotFile.cell``)."""

    worker: str
    lock: bytes
    unlock: bytes
    bound: int
    waiting: int
    at: int
    on: int
    mine: int
    mine_on: int


def supported() -> bool:
    """True where open-file-description locks exist (Linux): elsewhere every slot goes by the socket."""
    return _OFD


def table_path(socket_path: str) -> str:
    """The slot file of the server listening on ``socket_path`` (beside it, in the same private folder)."""
    return socket_path + ".table"


class SlotFile:
    """One process's map of the host's slot file; ``create`` (the server) or ``open`` (a worker)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.map = mmap.mmap(fd, _CELLS * 8)
        self.cells = memoryview(self.map).cast("q")
        self.row = -1  # the row this process owns (``claim``)
        self.closed = False
        self._known: dict[_Directory, dict[tuple[int, str], int]] = {_WORKERS: {}, _MODELS: {}}
        self._seen = {_WORKERS: 0, _MODELS: 0}  # entries read, of each kind
        self._lock = [_flock(fcntl.F_WRLCK, p) for p in range(POOLS)]
        self._unlock = [_flock(fcntl.F_UNLCK, p) for p in range(POOLS)]

    @classmethod
    def create(cls, path: str) -> SlotFile:
        """A new, empty file at ``path`` (the server's; it owns row 0)."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        os.ftruncate(fd, _CELLS * 8)
        table = cls(fd)
        for cell, value in enumerate((MAGIC, VERSION, ROWS, POOLS, MODELS, 0, 0, 1)):
            table.cells[cell] = value
        if not table._try(_LOCK_ROW):
            raise OSError(f"slot file {path} is owned by another server")
        table.row = 0
        table.cells[_CLAIMED] = 1
        return table

    @classmethod
    def open(cls, path: str) -> SlotFile | None:
        """The server's file with a row of this process's own; None when there is none to use (no file,
        another layout, every row taken)."""
        if not _OFD:
            return None
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            if os.fstat(fd).st_size < _CELLS * 8:
                os.close(fd)
                return None
            table = cls(fd)
        except OSError:
            os.close(fd)
            return None
        if tuple(table.cells[0:5]) != (MAGIC, VERSION, ROWS, POOLS, MODELS) or not table._claim():
            table.close()
            return None
        return table

    def close(self) -> None:
        """Let go of the map and the row (the server zeroes it when it sees the row's lock free)."""
        if self.closed:
            return
        self.closed = True
        self.cells.release()
        self.map.close()
        os.close(self.fd)  # the last reference to the file description: its locks go with it

    # -- entries ------------------------------------------------------------------------------------

    def pool(self, name: str) -> int | None:
        """The index of worker ``name``'s entry, added if new; None when the table has no room for it."""
        return self._entry(_WORKERS, -1, name)

    def model(self, pool: int, name: str) -> int | None:
        """The index of ``name``'s entry on worker ``pool``, added if new; None when there is no room."""
        return self._entry(_MODELS, pool, name)

    def model_names(self, pool: int) -> dict[int, str]:
        """Every model entry of worker ``pool``, by index."""
        with self._locked(_LOCK_DIRECTORY):
            self._read(_MODELS)
        return {index: name for (owner, name), index in self._known[_MODELS].items() if owner == pool}

    def _entry(self, kind: _Directory, owner: int, name: str) -> int | None:
        known, key = self._known[kind], (owner, name)
        index = known.get(key)
        if index is not None:
            return index
        data = name.encode()
        if len(data) > (ENTRY - kind.head) * 8:
            return None
        with self._locked(_LOCK_DIRECTORY):
            self._read(kind)
            index, seen = known.get(key), self._seen[kind]
            if index is None and seen < kind.capacity:
                at = kind.at + seen * ENTRY
                start = (at + kind.head) * 8
                self.map[start : start + len(data)] = data
                if kind.owner:
                    self.cells[at + kind.owner] = owner
                self.cells[at] = len(data)  # last but the count: an entry with a length is whole
                self.cells[kind.used] = seen + 1
                known[key] = index = seen
                self._seen[kind] = seen + 1
        return index

    def _read(self, kind: _Directory) -> None:
        """The entries other processes added since this one last looked (the directory lock held)."""
        known = self._known[kind]
        for index in range(self._seen[kind], self.cells[kind.used]):
            at = kind.at + index * ENTRY
            start = (at + kind.head) * 8
            owner = self.cells[at + kind.owner] if kind.owner else -1
            known[(owner, bytes(self.map[start : start + self.cells[at]]).decode())] = index
        self._seen[kind] = self.cells[kind.used]

    # -- counts -------------------------------------------------------------------------------------

    def cell(self, worker: str, pool: int, model: int) -> Cell:
        """Model entry ``model`` on worker entry ``pool`` (named ``worker``), for ``take`` and ``give``."""
        entry, at, on = _POOL_DIR + pool * ENTRY, _COUNTS + pool, _COUNTS + POOLS + model
        mine = self.row * _STRIDE
        return Cell(
            worker, self._lock[pool], self._unlock[pool], entry + 1, entry + 2, at, on, at + mine, on + mine
        )

    def bound(self, pool: int, max_concurrent: int) -> None:
        """Worker ``pool``'s ``max_concurrent`` (the latest plan's: whoever configures last)."""
        self.cells[_POOL_DIR + pool * ENTRY + 1] = max_concurrent

    def take(self, cell: Cell, limit: int) -> int:
        """``TAKEN`` (one of the worker's slots for the model, under ``limit``, is now this process's),
        ``FULL``, or ``QUEUE`` (its queue has waiters: the server decides)."""
        cells, fd = self.cells, self.fd
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, cell.lock)
        try:
            if cells[cell.waiting]:
                return QUEUE
            at, on = cell.at, cell.on
            end = at + cells[_HIGH] * _STRIDE
            if sum(cells[at:end:_STRIDE]) >= cells[cell.bound] or sum(cells[on:end:_STRIDE]) >= limit:
                return FULL
            cells[cell.mine] += 1
            cells[cell.mine_on] += 1
            return TAKEN
        finally:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, cell.unlock)

    def give(self, cell: Cell) -> bool:
        """Give back a slot ``take`` took (no lock: this row is this process's alone); True when the
        worker's queue has waiters (tell the server)."""
        if self.closed:  # the row is the server's to zero now
            return False
        cells = self.cells
        cells[cell.mine] -= 1
        cells[cell.mine_on] -= 1
        return cells[cell.waiting] > 0

    def in_use(self, pool: int) -> int:
        """Worker ``pool``'s slots held, every process's together."""
        at = _COUNTS + pool
        return sum(self.cells[at : at + self.cells[_HIGH] * _STRIDE : _STRIDE])

    def model_in_use(self, model: int) -> int:
        at = _COUNTS + POOLS + model
        return sum(self.cells[at : at + self.cells[_HIGH] * _STRIDE : _STRIDE])

    def max_concurrent(self, pool: int) -> int:
        return self.cells[_POOL_DIR + pool * ENTRY + 1]

    # -- the server's part ---------------------------------------------------------------------------

    def add(self, pool: int, model: int | None, step: int) -> None:
        """Row 0 (the server's) takes (+1) or gives back (-1) a slot; ``model`` None: not counted here."""
        mine = _COUNTS + self.row * _STRIDE
        self.cells[mine + pool] += step
        if model is not None:
            self.cells[mine + POOLS + model] += step

    def publish(self, pool: int, waiting: int) -> None:
        """The length of worker ``pool``'s queue (the lock held)."""
        self.cells[_POOL_DIR + pool * ENTRY + 2] = waiting

    def lock(self, pool: int) -> None:
        fcntl.fcntl(self.fd, fcntl.F_OFD_SETLKW, self._lock[pool])

    def unlock(self, pool: int) -> None:
        fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, self._unlock[pool])

    def reclaim(self, row: int | None = None) -> bool:
        """Zero the rows whose owner is dead (``row``: that one only); True when one held a slot."""
        rows = range(1, self.cells[_HIGH]) if row is None else (row,)
        freed = False
        for r in rows:
            if not self.cells[_CLAIMED + r] or not self._try(_LOCK_ROW + r):
                continue  # unclaimed, or its owner is alive
            start = _COUNTS + r * _STRIDE
            freed = freed or any(self.cells[start : start + _STRIDE])
            self.map[start * 8 : (start + _STRIDE) * 8] = bytes(_STRIDE * 8)
            self.cells[_CLAIMED + r] = 0
            fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, _flock(fcntl.F_UNLCK, _LOCK_ROW + r))
        return freed

    # -- locks ---------------------------------------------------------------------------------------

    def _claim(self) -> bool:
        """Own a free row: its lock, its counts zeroed (a dead owner's), the rows in use past it."""
        for r in range(1, ROWS):
            if self._try(_LOCK_ROW + r):
                start = _COUNTS + r * _STRIDE
                self.map[start * 8 : (start + _STRIDE) * 8] = bytes(_STRIDE * 8)
                self.cells[_CLAIMED + r] = 1
                with self._locked(_LOCK_DIRECTORY):
                    if self.cells[_HIGH] <= r:
                        self.cells[_HIGH] = r + 1
                self.row = r
                return True
        return False

    def _try(self, byte: int) -> bool:
        try:
            fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, _flock(fcntl.F_WRLCK, byte))
        except OSError:  # EAGAIN/EACCES: another file description holds it
            return False
        return True

    @contextmanager
    def _locked(self, byte: int) -> Iterator[None]:
        fcntl.fcntl(self.fd, fcntl.F_OFD_SETLKW, _flock(fcntl.F_WRLCK, byte))
        try:
            yield
        finally:
            fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, _flock(fcntl.F_UNLCK, byte))


# -- the server's pools ------------------------------------------------------------------------------


@dataclass(eq=False)
class SharedPool(SlotPool):
    """The server's pool of one worker: the fair queue and the slots it handed out (row 0), checked
    against every process's count in ``shared``. Without a file (or room in it) it is a plain
    ``SlotPool``: then every process's slots go through the server."""

    shared: SlotFile | None = None
    index: int | None = None  # the worker's entry in ``shared``
    cells: dict[str, int | None] = field(default_factory=dict)  # model entries (None: counted here only)
    depth: int = 0  # ``_held`` nesting: the lock is taken once, let go (queue length published) once
    watch: asyncio.TimerHandle | None = None  # the next look for slots given back, while waiters wait

    def __post_init__(self) -> None:
        if self.shared is not None:
            self.index = self.shared.pool(self.name)
            if self.index is not None:
                self.shared.bound(self.index, self.max_concurrent)

    def configure(self, max_concurrent: int, max_waiting: int, max_wait_s: float) -> None:
        with self._held():
            if self.shared is not None and self.index is not None:
                self.shared.bound(self.index, max_concurrent)
            super().configure(max_concurrent, max_waiting, max_wait_s)

    def wake(self) -> None:
        """A slot came back elsewhere (a worker's release, a dead process's row): hand it over."""
        with self._held():
            self._wake()

    def held(self) -> tuple[int, dict[str, int]]:
        shared, index = self.shared, self.index
        if shared is None or index is None:
            return super().held()
        per_model = {m: n for m, n in self.per_model.items() if self.cells.get(m) is None}
        for cell, model in shared.model_names(index).items():
            count = shared.model_in_use(cell)
            if count:
                per_model[model] = count
        return shared.in_use(index), per_model

    def try_acquire(self, model: str, limit: int) -> SlotLease | None:
        if self.index is not None and model not in self.cells:
            self._cell(model)  # before the lock: the directory has a lock of its own
        with self._held():
            return super().try_acquire(model, limit)

    def _join(self, model: str, limit: int, turn: Turn) -> tuple[Waiter, asyncio.TimerHandle]:
        with self._held():
            joined = super()._join(model, limit, turn)
            self._publish()  # before the counts are read: a give from now on tells the server
            self._wake()  # a slot given back between try_acquire and now (it could not tell us)
            self._watch()
            return joined

    def _watch(self) -> None:
        """While waiters wait, look again in ``RECHECK_S`` for a slot whose give read the queue's
        length before this process's store of it landed (and whose own store this look missed)."""
        if self.watch is None and self.waiters and self.index is not None:
            self.watch = asyncio.get_running_loop().call_later(RECHECK_S, self._look)

    def _look(self) -> None:
        self.watch = None
        self.wake()
        self._watch()

    def _publish(self) -> None:
        if self.shared is not None and self.index is not None:
            self.shared.publish(self.index, len(self.waiters))

    def _fits(self, model: str, limit: int) -> bool:
        shared, index = self.shared, self.index
        if shared is None or index is None:
            return super()._fits(model, limit)
        cell = self.cells.get(model)
        on_model = self.per_model.get(model, 0) if cell is None else shared.model_in_use(cell)
        return shared.in_use(index) < shared.max_concurrent(index) and on_model < limit

    def _take(self, model: str) -> None:
        super()._take(model)
        if self.shared is not None and self.index is not None:
            self.shared.add(self.index, self.cells.get(model), +1)

    def _release(self, model: str) -> None:
        with self._held():
            if self.shared is not None and self.index is not None:
                self.shared.add(self.index, self.cells.get(model), -1)
            super()._release(model)

    def _wake(self) -> None:
        with self._held():
            super()._wake()

    def _forget(self, waiter: Waiter) -> None:
        with self._held():
            super()._forget(waiter)

    def _cell(self, model: str) -> None:
        shared, index = self.shared, self.index
        self.cells[model] = shared.model(index, model) if shared is not None and index is not None else None

    @contextmanager
    def _held(self) -> Iterator[None]:
        """This worker's lock (re-entrant); the queue's length published as it is let go."""
        shared, index = self.shared, self.index
        if shared is None or index is None:
            yield
            return
        if not self.depth:
            shared.lock(index)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth:
                self._publish()
                shared.unlock(index)
