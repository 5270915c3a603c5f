"""The shared backend for several replicas: slots, queues and circuits in one Redis (or Valkey).

Per worker, under ``interlock:w:<worker>``: ``held`` (lease id -> expiry, ms of the server's clock),
``m:<model>`` (the same, per model), ``lmodel`` (lease id -> model), ``queue`` (its members
"<arrival> <waiter id>", scored by their place in the fair order), ``qm`` (waiter id -> its member),
``arrivals`` (the count that numbers them), ``vt`` and ``tfin`` (the fair queue's clock and tags),
``qexp`` (waiter id -> alive-until), ``qmodel`` (waiter id -> "limit model"), ``rejected``.
Every change is one Lua script, so it is atomic; times come from the server (``TIME``), so replicas'
clocks do not matter. One Redis, not a Cluster (the scripts build keys).

- Leases expire ``lease_ttl`` after their last renewal; each replica renews its own every third of
  that while the request runs, so a replica that dies (SIGKILL, power) frees its slots within the TTL.
  A renewal holds a lease again where the store lost it (a Redis restarted empty, or a replica stalled
  past the TTL): the request still runs, so the store counts it again within a third of the TTL (in
  that gap, other replicas may be granted those slots once more).
- Fair order (``fair.py``, the same rule as one process, applied across replicas): a request is granted
  a slot only if no waiter ahead of it in the queue could use one now; ``queue`` scores a waiter
  ``rank * CLASS_SPAN + finish``, and Redis orders equal scores by member, so each member starts
  with its zero-padded arrival number: ``(rank, finish, arrival)`` as in ``fair.py`` (by bare waiter
  id, two tenants' equal tags would go by replica id, not by who came first); ``vt`` is the queue's
  virtual clock, ``tfin`` each tenant's last finish tag (both dropped when the queue empties). A full
  queue pushes out its last waiter for a newcomer with an earlier place (``out``: told on its next
  poll, then 429). Waiters poll, and are woken early by a message on ``interlock:w:<worker>:freed``.
  A waiter that stops polling (its replica died) leaves the queue within 2 s.
- Retry-After: the queue's ``max_wait`` rounded up (as in one process); messages give the shared count.
- Circuits: a replica that opens an endpoint's circuit, or sees a probe fail, publishes it on
  ``interlock:health``; the others open theirs at once, so no replica waits out a dead box's timeout.
  A candidate's circuit too: opened (until its next trial) and half-opened (its trial or a check
  passed), so replicas share one backoff and the recovery one of them saw.
  The request path reads only its own ``HealthBook``.
- A call that meets a stale connection (the store restarted) is tried once more on a fresh one.
- Store unreachable (refused, timed out): fail open to this process's own slot table, log it loudly,
  count it (``interlock_state_fallbacks_total``, ``interlock_state_degraded``), retry the store at most
  once a second. Socket timeouts are short, so no request hangs on the store.
- An acquire call carries the server time past which its caller no longer waits for the answer
  (``EXPIRES_S`` after it is sent, on the server's clock as last read: ``_sync_clock``); a call the
  store runs later (it was paused, or stalled, and the replica fell back meanwhile) changes nothing, so
  no slot is ever held for a request that gave up on it.
- Through a switch-over the bound is the documented one, ``max_concurrent`` per process: this process's
  table counts the slots the store granted it too (``SlotPool.count_granted``), so a request it lets
  through alone never joins ones the store let through; and while any slot it granted alone is still
  held, the worker's requests stay on its table (the store, back, does not know of those slots).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from interlock.runtime.base.errors import SlotUnavailable
from interlock.runtime.loaded.callers import COMMON, Turn
from interlock.runtime.loaded.tables import WorkerLimits
from interlock.runtime.state.base import Lease, SharedLearning, SlotBackend, SlotReport
from interlock.runtime.state.counters import CallerCounters
from interlock.runtime.state.fair import CLASS_SPAN
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.state.pool import SlotLease

if TYPE_CHECKING:
    from interlock.runtime.state.base import SharedHealth

log = logging.getLogger("interlock.state")

PREFIX = "interlock"
RECONNECT_EVERY_S = 1.0
POLL_S = 0.05  # a waiter asks again at least this often (a release wakes it sooner)
SOCKET_TIMEOUT_S = 0.5
EXPIRES_S = 0.8 * SOCKET_TIMEOUT_S  # an acquire the store runs later than this after it was sent: a no-op
_SPAN = repr(CLASS_SPAN)  # as the scripts read it

_PURGE = """
local ARRIVAL_WIDTH = 15  -- a queue member is its arrival number, this wide, a space, the waiter's id
local function idle(p)
  if redis.call('ZCARD', p .. ':queue') == 0 then redis.call('DEL', p .. ':vt', p .. ':tfin') end
end
local function purge(p, now)
  local dead = redis.call('ZRANGEBYSCORE', p .. ':held', '-inf', now)
  for _, lid in ipairs(dead) do
    local m = redis.call('HGET', p .. ':lmodel', lid)
    if m then redis.call('ZREM', p .. ':m:' .. m, lid) end
    redis.call('HDEL', p .. ':lmodel', lid)
  end
  redis.call('ZREMRANGEBYSCORE', p .. ':held', '-inf', now)
  local gone = redis.call('ZRANGEBYSCORE', p .. ':qexp', '-inf', now)
  for _, wid in ipairs(gone) do
    local member = redis.call('HGET', p .. ':qm', wid)
    if member then redis.call('ZREM', p .. ':queue', member) end
    redis.call('HDEL', p .. ':qm', wid)
    redis.call('HDEL', p .. ':qmodel', wid)
  end
  redis.call('ZREMRANGEBYSCORE', p .. ':qexp', '-inf', now)
  redis.call('ZREMRANGEBYSCORE', p .. ':out', '-inf', now)
  if #gone > 0 then idle(p) end
end
local function waiter(member) return string.sub(member, ARRIVAL_WIDTH + 2) end  -- its id
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS[1] worker prefix; ARGV id, max_concurrent, limit, max_waiting, wait, ttl_ms, alive_ms, model,
# tenant, weight, rank, span (the fair queue: ``fair.py``; a waiter's score is rank * span + finish
# tag), polling ('1': this id queued before), expires (the server's time in ms past which the caller
# has stopped waiting for this call's answer; '0': none): a call run later changes nothing -> {5, 0}
# -> {1, in_use} granted, {0, waiting} none free (not waiting), {2, waiting} queued, {3, waiting} full,
# {4, waiting} pushed out of the full queue by a newcomer with an earlier place (told on its next poll)
ACQUIRE = (
    _PURGE
    + """
local p, id, model = KEYS[1], ARGV[1], ARGV[8]
local maxc, limit, maxw = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local wait, ttl, alive = ARGV[5] == '1', tonumber(ARGV[6]), tonumber(ARGV[7])
local tenant, weight, rank, span = ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
local expires = tonumber(ARGV[14] or '0')
if expires > 0 and now > expires then return {5, 0} end  -- run late: its caller has given up
purge(p, now)
local in_use = redis.call('ZCARD', p .. ':held')
local function used(m) return redis.call('ZCARD', p .. ':m:' .. m) end
local member = redis.call('HGET', p .. ':qm', id)
local score = member and redis.call('ZSCORE', p .. ':queue', member)
if ARGV[13] == '1' and not score and redis.call('ZREM', p .. ':out', id) == 1 then
  return {4, redis.call('ZCARD', p .. ':queue')}  -- pushed out of a full queue since its last poll
end
local finish = nil
local function place()  -- a newcomer's score: read only when someone waits (ties: they go first)
  if not finish then
    local vt = tonumber(redis.call('GET', p .. ':vt') or '0')
    finish = math.max(vt, tonumber(redis.call('HGET', p .. ':tfin', tenant) or '0')) + 1 / weight
  end
  return rank * span + finish
end
if in_use < maxc and used(model) < limit then
  local before = {}
  if score then
    local at = redis.call('ZRANK', p .. ':queue', member)
    if at > 0 then before = redis.call('ZRANGE', p .. ':queue', 0, at - 1) end
  elseif redis.call('ZCARD', p .. ':queue') > 0 then
    before = redis.call('ZRANGEBYSCORE', p .. ':queue', '-inf', place())
  end
  local ahead, ahead_same = 0, 0
  for _, queued in ipairs(before) do
    local spec = redis.call('HGET', p .. ':qmodel', waiter(queued))
    if spec then
      local sp = string.find(spec, ' ')
      local m = string.sub(spec, sp + 1)
      if used(m) < tonumber(string.sub(spec, 1, sp - 1)) then
        ahead = ahead + 1
        if m == model then ahead_same = ahead_same + 1 end
      end
    end
  end
  if ahead < maxc - in_use and used(model) + ahead_same < limit then
    redis.call('ZADD', p .. ':held', now + ttl, id)
    redis.call('ZADD', p .. ':m:' .. model, now + ttl, id)
    redis.call('HSET', p .. ':lmodel', id, model)
    if score then  -- a waiter handed its slot: the clock moves to its finish tag
      local tag = tonumber(score) % span
      if tag > tonumber(redis.call('GET', p .. ':vt') or '0') then redis.call('SET', p .. ':vt', tag) end
      redis.call('ZREM', p .. ':queue', member)
      redis.call('ZREM', p .. ':qexp', id)
      redis.call('HDEL', p .. ':qm', id)
      redis.call('HDEL', p .. ':qmodel', id)
      idle(p)
    end
    return {1, in_use + 1}
  end
end
local waiting = redis.call('ZCARD', p .. ':queue')
if score then
  redis.call('ZADD', p .. ':qexp', now + alive, id)
  return {2, waiting}
end
if not wait then return {0, waiting} end
if waiting >= maxw then  -- full: the waiter that would be served last makes room, or the newcomer goes
  local last = redis.call('ZRANGE', p .. ':queue', -1, -1, 'WITHSCORES')
  redis.call('INCR', p .. ':rejected')
  if maxw <= 0 or #last < 2 or tonumber(last[2]) <= place() then return {3, waiting} end
  local lid = waiter(last[1])
  redis.call('ZREM', p .. ':queue', last[1])
  redis.call('ZREM', p .. ':qexp', lid)
  redis.call('HDEL', p .. ':qm', lid)
  redis.call('HDEL', p .. ':qmodel', lid)
  redis.call('ZADD', p .. ':out', now + alive, lid)
  waiting = waiting - 1
end
local at = place()
redis.call('HSET', p .. ':tfin', tenant, finish)
member = string.format('%0' .. ARRIVAL_WIDTH .. 'd', redis.call('INCR', p .. ':arrivals')) .. ' ' .. id
redis.call('HSET', p .. ':qm', id, member)
redis.call('ZADD', p .. ':queue', at, member)
redis.call('ZADD', p .. ':qexp', now + alive, id)
redis.call('HSET', p .. ':qmodel', id, limit .. ' ' .. model)
return {2, waiting + 1}
"""
)

# KEYS[1] worker prefix; ARGV id, rejected (1: count a wait that ran out). Releases or leaves the queue.
RELEASE = """
local p, id = KEYS[1], ARGV[1]
local m = redis.call('HGET', p .. ':lmodel', id)
if m then redis.call('ZREM', p .. ':m:' .. m, id) end
redis.call('HDEL', p .. ':lmodel', id)
local freed = redis.call('ZREM', p .. ':held', id)
local member = redis.call('HGET', p .. ':qm', id)
local left = member and redis.call('ZREM', p .. ':queue', member) or 0
redis.call('ZREM', p .. ':qexp', id)
redis.call('HDEL', p .. ':qm', id)
redis.call('HDEL', p .. ':qmodel', id)
local waiting = redis.call('ZCARD', p .. ':queue')
if left == 1 and waiting == 0 then redis.call('DEL', p .. ':vt', p .. ':tfin') end
if ARGV[2] == '1' then
  redis.call('INCR', p .. ':rejected')
  return {waiting}
end
if freed == 1 and waiting > 0 then redis.call('PUBLISH', p .. ':freed', '') end
return {waiting}
"""

# KEYS[1] worker prefix; ARGV ttl_ms, then id, model pairs: push the expiry of the leases still held,
# and hold again a lease the store forgot (it restarted empty) while its request still runs
RENEW = (
    _PURGE
    + """
local p, ttl = KEYS[1], tonumber(ARGV[1])
for i = 2, #ARGV, 2 do
  local id, m = ARGV[i], ARGV[i + 1]
  redis.call('ZADD', p .. ':held', now + ttl, id)
  redis.call('ZADD', p .. ':m:' .. m, now + ttl, id)
  redis.call('HSET', p .. ':lmodel', id, m)
end
return 1
"""
)

# KEYS[1] worker prefix -> {in_use, waiting, rejected, model, n, model, n, ...}
REPORT = (
    _PURGE
    + """
local p = KEYS[1]
purge(p, now)
local out = {redis.call('ZCARD', p .. ':held'), redis.call('ZCARD', p .. ':queue'),
             tonumber(redis.call('GET', p .. ':rejected') or '0')}
local counts = {}
for _, m in ipairs(redis.call('HVALS', p .. ':lmodel')) do counts[m] = (counts[m] or 0) + 1 end
for m, n in pairs(counts) do table.insert(out, m); table.insert(out, n) end
return out
"""
)


@dataclass(frozen=True, slots=True)
class RedisOptions:
    url: str  # what redis-py connects to (our own query parameters taken out)
    lease_ttl_s: float = 10.0
    prefix: str = PREFIX

    @classmethod
    def parse(cls, url: str) -> RedisOptions:
        """``redis://host:port/db?lease_ttl=10&prefix=interlock`` (the two are ours; the rest redis-py's)."""
        parts = urlsplit(url)
        ours = {"lease_ttl", "prefix"}
        query = parse_qsl(parts.query)
        mine = dict((k, v) for k, v in query if k in ours)
        rest = urlencode([(k, v) for k, v in query if k not in ours])
        return cls(
            urlunsplit(parts._replace(query=rest)),
            float(mine.get("lease_ttl", 10.0)),
            mine.get("prefix", PREFIX),
        )


class RedisLease(Lease):
    __slots__ = ("backend", "ident", "local", "model", "released", "worker")

    def __init__(self, backend: RedisSlots, worker: str, model: str, ident: str, local: SlotLease) -> None:
        self.backend = backend
        self.worker = worker
        self.model = model
        self.ident = ident
        self.local = local  # the same slot in this process's own table
        self.released = False

    async def release(self) -> None:
        if not self.released:
            self.released = True
            self.local.release()
            await self.backend._release(self)


class AloneLease(Lease):
    """A slot this process's own table granted while the store was out: counted until released."""

    __slots__ = ("backend", "held", "worker")

    def __init__(self, backend: RedisSlots, worker: str, held: Lease) -> None:
        self.backend = backend
        self.worker = worker
        self.held: Lease | None = held

    async def release(self) -> None:
        held, self.held = self.held, None
        if held is not None:
            self.backend._alone[self.worker] -= 1
            await held.release()


class RedisSlots(SlotBackend):
    """One replica's view of the slots kept in Redis; its own table while Redis is unreachable."""

    scope = "shared"

    def __init__(self, url: str) -> None:
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError as RedisConnectionError

        self.options = RedisOptions.parse(url)
        # a pooled connection goes stale when the store restarts: each call is tried once more, on a
        # fresh connection, before the replica falls back to its own table (a refused connect and a
        # timeout still fall back after that one retry; no backoff: the socket timeouts bound it)
        self.client: Any = aioredis.Redis.from_url(
            self.options.url,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
            retry=Retry(NoBackoff(), 1, (RedisConnectionError,)),
            retry_on_error=[RedisConnectionError],
        )
        self.replica = uuid.uuid4().hex[:12]
        self.fallback = MemorySlots()
        self.fallbacks = 0
        self._down_until: float | None = None  # loop time; None: the store is in use
        self._ids = itertools.count(1)
        self._bounds: dict[str, WorkerLimits] = {}
        self._held: dict[str, RedisLease] = {}
        self._alone: dict[str, int] = {}  # per worker: slots held that this process's table granted alone
        self._waiting: dict[str, int] = {}
        self._rejected: dict[str, int] = {}
        self._wakes: dict[str, asyncio.Event] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._health: SharedHealth | None = None
        self._scripts: dict[str, Any] = {}
        self._offset_ms: float | None = None  # the server's clock less the loop's, in ms (last read)

    @property
    def degraded(self) -> bool:
        return self._down_until is not None

    def configure(self, workers: Mapping[str, WorkerLimits]) -> None:
        self.fallback.configure(workers)
        self._bounds = dict(workers)
        for name in workers:
            self._alone.setdefault(name, 0)
            self._waiting.setdefault(name, 0)
            self._rejected.setdefault(name, 0)

    def share_health(self, book: SharedHealth) -> None:
        """Publish this replica's circuit openings and apply the others' (call before ``start``)."""
        self._health = book
        book.listener = self._publish_health
        book.candidate_listener = self._publish_candidate

    async def start(self) -> None:
        for name, script in (
            ("acquire", ACQUIRE),
            ("release", RELEASE),
            ("renew", RENEW),
            ("report", REPORT),
        ):
            self._scripts[name] = self.client.register_script(script)
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._renew_loop()))
        self._tasks.append(loop.create_task(self._listen()))
        try:
            await self._sync_clock()
        except Exception as exc:
            self._down(exc)

    async def _sync_clock(self) -> None:
        """Read the server's clock (``TIME``): what an acquire's ``expires`` is written in."""
        loop = asyncio.get_running_loop()
        sent = loop.time()
        seconds, micros = await self.client.time()
        mid = (sent + loop.time()) / 2  # the reply's time, within half the round trip
        self._offset_ms = seconds * 1000 + micros / 1000 - mid * 1000

    def _expires(self, loop: asyncio.AbstractEventLoop) -> str:
        offset = self._offset_ms
        if offset is None:
            return "0"
        return str(int((loop.time() + EXPIRES_S) * 1000 + offset))

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for lease in list(self._held.values()):
            await lease.release()
        with contextlib.suppress(Exception):
            await self.client.aclose()

    def _new_counters(self) -> CallerCounters:
        from interlock.runtime.state.redis_counters import RedisCounters  # only with caller limits

        return RedisCounters(self)

    def shared_learning(self) -> SharedLearning:
        from interlock.runtime.state.redis_learned import RedisLearning

        return RedisLearning(self.client, self.options.prefix)

    # -- slots --------------------------------------------------------------------------------------

    async def acquire(
        self, worker: str, model: str, limit: int, *, wait: bool, turn: Turn = COMMON
    ) -> Lease | None:
        if not self._usable() or self._alone[worker]:  # out, or slots it granted alone still held
            return await self._alone_acquire(worker, model, limit, wait=wait, turn=turn)
        bounds = self._bounds[worker]
        ident = f"{self.replica}:{next(self._ids)}"
        key = f"{self.options.prefix}:w:{worker}"
        ttl_ms = int(self.options.lease_ttl_s * 1000)
        alive_ms = max(2000, int(POLL_S * 8000))
        args = [ident, bounds.max_concurrent, limit, bounds.max_waiting, int(wait), ttl_ms, alive_ms, model]
        args += [turn.tenant, repr(turn.weight), turn.rank, _SPAN, "0", "0"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + bounds.max_wait_s
        queued = False
        try:
            while True:
                args[-1] = self._expires(loop)
                try:
                    status, count = await self._scripts["acquire"](keys=[key], args=args)
                    if status == 5:  # run past its expiry: the store is too slow to wait on
                        raise TimeoutError("the shared state store ran the acquire too late")
                except Exception as exc:  # any client error: per-process limits
                    self._down(exc)
                    return await self._alone_acquire(worker, model, limit, wait=wait, turn=turn)
                self._up()
                if status == 1:
                    return self._granted(worker, model, ident)
                if status == 0:
                    return None
                if status == 3 or status == 4:
                    self._rejected[worker] += 1
                    raise SlotUnavailable(
                        f"worker {worker} has no free slot for {model} and its queue is full "
                        f"({count} waiting)"
                        + (
                            ": a request of a tenant with less waiting took this one's place"
                            if status == 4
                            else ""
                        ),
                        retry_after=_retry_after(bounds),
                    )
                if not queued:
                    queued = True
                    args[-2] = "1"  # from now on a poll (told if pushed out meanwhile)
                    self._waiting[worker] += 1
                left = deadline - loop.time()
                if left <= 0 or bounds.max_wait_s <= 0:
                    count = await self._leave(key, ident, rejected=True)
                    self._rejected[worker] += 1
                    raise SlotUnavailable(
                        f"worker {worker} had no free slot for {model} within {bounds.max_wait_s:g}s "
                        f"({count} waiting)",
                        retry_after=_retry_after(bounds),
                    )
                wake = self._wakes.setdefault(worker, asyncio.Event())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), min(POLL_S, left))
        except SlotUnavailable:
            raise
        except BaseException:  # cancelled (client gone): out of the queue, and any slot granted meanwhile
            if queued:
                await asyncio.shield(self._leave(key, ident, rejected=False))
            raise
        finally:
            if queued:
                self._waiting[worker] -= 1

    async def _alone_acquire(
        self, worker: str, model: str, limit: int, *, wait: bool, turn: Turn
    ) -> Lease | None:
        """A slot of this process's own table (which counts the store's grants to it as well)."""
        held = await self.fallback.acquire(worker, model, limit, wait=wait, turn=turn)
        if held is None:
            return None
        self._alone[worker] += 1
        return AloneLease(self, worker, held)

    def _granted(self, worker: str, model: str, ident: str) -> RedisLease:
        local = self.fallback.pools[worker].count_granted(model)
        lease = RedisLease(self, worker, model, ident, local)
        self._held[ident] = lease
        return lease

    async def _release(self, lease: RedisLease) -> None:
        self._held.pop(lease.ident, None)
        key = f"{self.options.prefix}:w:{lease.worker}"
        await asyncio.shield(self._leave(key, lease.ident, rejected=False))

    async def _leave(self, key: str, ident: str, *, rejected: bool) -> int:
        try:
            result = await self._scripts["release"](keys=[key], args=[ident, int(rejected)])
        except Exception as exc:  # the lease TTL frees it; a queue place expires
            self._down(exc)
            return 0
        return int(result[0])

    def waiting(self, worker: str) -> int:
        return self._waiting.get(worker, 0) + self.fallback.waiting(worker)

    def local(self, worker: str) -> SlotReport:
        spare = self.fallback.local(worker)  # its table counts the store's grants too
        return SlotReport(
            spare.in_use,
            dict(spare.per_model),
            self._waiting.get(worker, 0) + spare.waiting,
            self._rejected.get(worker, 0) + spare.rejected,
        )

    async def report(self) -> Mapping[str, SlotReport]:
        if not self._usable():
            return await self.fallback.report()
        out: dict[str, SlotReport] = {}
        try:
            for worker in self._bounds:
                raw = await self._scripts["report"](keys=[f"{self.options.prefix}:w:{worker}"])
                per_model = {_text(raw[i]): int(raw[i + 1]) for i in range(3, len(raw), 2)}
                out[worker] = SlotReport(int(raw[0]), per_model, int(raw[1]), int(raw[2]))
        except Exception as exc:
            self._down(exc)
            return await self.fallback.report()
        return out

    # -- the store's health -------------------------------------------------------------------------

    def _usable(self) -> bool:
        """The store is in use, or out but due for another try (once a second)."""
        until = self._down_until
        return until is None or asyncio.get_running_loop().time() >= until

    def _up(self) -> None:
        if self._down_until is not None:
            self._down_until = None
            log.warning("shared state store reachable again: slots hold across replicas")

    def _down(self, exc: BaseException) -> None:
        first = self._down_until is None
        self._down_until = asyncio.get_running_loop().time() + RECONNECT_EVERY_S
        if first:
            self.fallbacks += 1
            log.error(
                "shared state store unreachable (%s): slots hold per process until it is back",
                type(exc).__name__,
            )

    async def _renew_loop(self) -> None:
        """Renew this replica's leases every third of the TTL; while the store is out, look for it."""
        ttl_ms = int(self.options.lease_ttl_s * 1000)
        while True:
            await asyncio.sleep(self.options.lease_ttl_s / 3)
            if self._usable():  # the server's clock read again (and the store noticed back unasked)
                try:
                    await self._sync_clock()
                except Exception as exc:
                    self._down(exc)
                else:
                    self._up()
            by_worker: dict[str, list[str]] = {}
            for lease in self._held.values():
                by_worker.setdefault(lease.worker, []).extend((lease.ident, lease.model))
            try:
                for worker, pairs in by_worker.items():
                    key = f"{self.options.prefix}:w:{worker}"
                    await self._scripts["renew"](keys=[key], args=[ttl_ms, *pairs])
                    for ident in pairs[::2]:  # released meanwhile: its release may have run first
                        if ident not in self._held:
                            await self._leave(key, ident, rejected=False)
            except Exception as exc:
                self._down(exc)

    async def _listen(self) -> None:
        """Wake local waiters when a slot is freed anywhere; apply circuits other replicas opened."""
        prefix = self.options.prefix
        while True:
            pubsub = self.client.pubsub()
            try:
                await pubsub.psubscribe(f"{prefix}:w:*:freed")
                await pubsub.subscribe(f"{prefix}:health")
                async for message in pubsub.listen():  # blocks on the socket: no polling
                    if message["type"] not in ("message", "pmessage"):
                        continue
                    channel = _text(message["channel"])
                    if channel == f"{prefix}:health":
                        self._apply_health(message["data"])
                    else:
                        worker = channel[len(prefix) + 3 : -len(":freed")]
                        event = self._wakes.pop(worker, None)
                        if event is not None:
                            event.set()
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                raise
            except Exception:  # store down: waiters still poll; listen again later
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                await asyncio.sleep(RECONNECT_EVERY_S)

    def _publish_health(self, label: str, open_for_s: float) -> None:
        """From ``HealthBook``: this replica found ``label`` down (``open_for_s`` > 0) or back (0)."""
        if self.degraded:
            return
        message = orjson.dumps({"from": self.replica, "endpoint": label, "open_for_s": open_for_s})
        task = asyncio.get_running_loop().create_task(self._publish(message))
        self._tasks.append(task)
        task.add_done_callback(self._forget)

    def _publish_candidate(self, cid: str, open_for_s: float) -> None:
        """From ``HealthBook``: this replica opened ``cid``'s circuit until its trial (``open_for_s``
        from now), or its trial or a check passed (0): the others take the same state."""
        if self.degraded:
            return
        message = orjson.dumps({"from": self.replica, "candidate": cid, "open_for_s": open_for_s})
        task = asyncio.get_running_loop().create_task(self._publish(message))
        self._tasks.append(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        with contextlib.suppress(ValueError):
            self._tasks.remove(task)

    async def _publish(self, message: bytes) -> None:
        try:
            await self.client.publish(f"{self.options.prefix}:health", message)
        except Exception as exc:
            self._down(exc)

    def _apply_health(self, data: Any) -> None:
        book = self._health
        if book is None:
            return
        try:
            event = orjson.loads(data)
            if event["from"] == self.replica:
                return
            if "candidate" in event:
                book.apply_shared_candidate(str(event["candidate"]), float(event["open_for_s"]))
                return
            book.apply_shared(str(event["endpoint"]), float(event["open_for_s"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            log.warning("ignoring a malformed health message on the shared store")


def _retry_after(bounds: WorkerLimits) -> int:
    return max(1, math.ceil(bounds.max_wait_s))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
