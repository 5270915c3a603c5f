"""Caller limits and credits holds in Redis, across replicas (``RedisCounters``): the scripts that take,
settle, claim and give back, run over the slot backend's own connection (``RedisSlots``, ``redis.py``),
with this process's own counters (``Spare``) while the store is out. Apart from ``redis.py`` because a
plan without caller limits or credits never needs it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from interlock.runtime.loaded.callers import Budget, Refusal
from interlock.runtime.state.counters import CallerCounters, Claim, Held, Short, granted
from interlock.runtime.state.spare import Spare


class Options(Protocol):
    @property
    def prefix(self) -> str: ...


class Store(Protocol):
    """What the counters use of the slot backend (``RedisSlots``): its client, its key prefix, and its
    view of whether the store is reachable."""

    client: Any

    @property
    def options(self) -> Options: ...

    def _usable(self) -> bool: ...

    def _down(self, exc: BaseException) -> None: ...

    def _up(self) -> None: ...


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# -- caller limits ---------------------------------------------------------------------------------

# ARGV prefix, n, hold, then per budget: name, requests_per_minute, tokens_per_minute, max_concurrent,
# then least -> the tokens reserved (admitted, counted: `hold`, or what the tightest tokens_per_minute
# leaves of it, in `:h`), or {budget, limit, value, retry_after_s as text}
TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local window = math.floor(now / 60)
local wait = (window + 1) * 60 - now
local p, n, hold = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local least = math.max(1, tonumber(ARGV[4 + n * 4] or '0'))
local grant = hold
for i = 0, n - 1 do
  local name = ARGV[4 + i * 4]
  local rpm, tpm, conc = tonumber(ARGV[5 + i * 4]), tonumber(ARGV[6 + i * 4]), tonumber(ARGV[7 + i * 4])
  local c = p .. ':c:' .. name
  if rpm > 0 and tonumber(redis.call('GET', c .. ':r:' .. window) or '0') >= rpm then
    return {name, 'requests_per_minute', rpm, tostring(wait)}
  end
  local used = tonumber(redis.call('GET', c .. ':t:' .. window) or '0')
  used = used + tonumber(redis.call('GET', c .. ':h') or '0')
  if tpm > 0 then
    if used + least > tpm then
      return {name, 'tokens_per_minute', tpm, tostring(wait)}
    end
    grant = math.min(grant, tpm - used)
  end
  if conc > 0 and tonumber(redis.call('GET', c .. ':f') or '0') >= conc then
    return {name, 'max_concurrent', conc, '1'}
  end
end
for i = 0, n - 1 do
  local c = p .. ':c:' .. ARGV[4 + i * 4]
  redis.call('INCR', c .. ':r:' .. window)
  redis.call('EXPIRE', c .. ':r:' .. window, 120)
  redis.call('INCR', c .. ':f')
  redis.call('EXPIRE', c .. ':f', IN_FLIGHT_TTL)
  if grant > 0 then
    redis.call('INCRBY', c .. ':h', grant)
    redis.call('EXPIRE', c .. ':h', IN_FLIGHT_TTL)
  end
end
return grant
"""

# ARGV prefix, tokens, held, names... -> nothing
DONE = """
local t = redis.call('TIME')
local window = math.floor((tonumber(t[1]) + tonumber(t[2]) / 1000000) / 60)
local p, tokens, held = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 4, #ARGV do
  local c = p .. ':c:' .. ARGV[i]
  if redis.call('DECR', c .. ':f') < 0 then redis.call('SET', c .. ':f', 0) end
  if held > 0 and redis.call('DECRBY', c .. ':h', held) < 0 then redis.call('SET', c .. ':h', 0) end
  if tokens > 0 then
    redis.call('INCRBY', c .. ':t:' .. window, tokens)
    redis.call('EXPIRE', c .. ':t:' .. window, 120)
  end
end
return 0
"""

# ARGV prefix, n, then per claim: name, room, asked, hold
# -> {-1, granted...} held (each granted hold, what the room leaves of `hold`, added to `:q:<name>`),
# or {index, held} of the first level without room
CLAIM = """
local p, n = ARGV[1], tonumber(ARGV[2])
for i = 0, n - 1 do
  local held = tonumber(redis.call('GET', p .. ':q:' .. ARGV[3 + i * 4]) or '0')
  if held + tonumber(ARGV[5 + i * 4]) > tonumber(ARGV[4 + i * 4]) then return {i, held} end
end
local granted = {-1}
for i = 0, n - 1 do
  local q = p .. ':q:' .. ARGV[3 + i * 4]
  local held = tonumber(redis.call('GET', q) or '0')
  local hold = math.max(0, math.min(tonumber(ARGV[6 + i * 4]), tonumber(ARGV[4 + i * 4]) - held))
  if hold > 0 then
    redis.call('INCRBY', q, hold)
    redis.call('EXPIRE', q, IN_FLIGHT_TTL)
  end
  granted[i + 2] = hold
end
return granted
"""

# ARGV prefix, then name, hold pairs -> nothing
UNCLAIM = """
for i = 2, #ARGV, 2 do
  local q = ARGV[1] .. ':q:' .. ARGV[i]
  if redis.call('DECRBY', q, tonumber(ARGV[i + 1])) <= 0 then redis.call('DEL', q) end
end
return 0
"""

IN_FLIGHT_TTL_S = 600
"""An in-flight count or credits hold untouched this long is dropped: the most a replica killed
mid-request (its decrements never sent) can hold a key's or tenant's concurrency or credits up."""


class RedisCounters(CallerCounters):
    """Caller limits and credits holds in the backend's Redis, across replicas; this process's own
    while it is out (and what was counted there is settled there)."""

    scope = "shared"

    def __init__(self, backend: Store) -> None:
        self.backend = backend
        self.spare = Spare()
        ttl = str(IN_FLIGHT_TTL_S)
        self._take = backend.client.register_script(TAKE.replace("IN_FLIGHT_TTL", ttl))
        self._done = backend.client.register_script(DONE)
        self._claim = backend.client.register_script(CLAIM.replace("IN_FLIGHT_TTL", ttl))
        self._unclaim = backend.client.register_script(UNCLAIM)

    async def _run(self, script: Any, args: list[Any]) -> tuple[bool, Any]:
        """(True, the script's answer), or (False, None) when the store is out (then marked down)."""
        backend = self.backend
        if not backend._usable():
            return False, None
        try:
            answer = await script(args=args)
        except Exception as exc:  # refused, timed out: limits hold per process until it is back
            backend._down(exc)
            return False, None
        backend._up()
        return True, answer

    async def reserve(self, budgets: Sequence[Budget], hold: int = 0, least: int = 0) -> Refusal | int:
        args: list[Any] = [self.backend.options.prefix, len(budgets), hold]
        for b in budgets:
            args += [b.name, b.requests_per_minute, b.tokens_per_minute, b.max_concurrent]
        args.append(least)
        reached, answer = await self._run(self._take, args)
        if not reached:
            return await self.spare.reserve(budgets, hold, least)
        if not isinstance(answer, list):
            return int(answer)
        name, limit, value, wait = answer
        return Refusal(_text(name), _text(limit), int(value), float(_text(wait)))

    async def done(self, budgets: Sequence[Budget], tokens: int, held: int = 0) -> None:
        if await self.spare.done(budgets, tokens, held):
            return
        args = [self.backend.options.prefix, tokens, held, *(b.name for b in budgets)]
        await self._run(self._done, args)  # not reached: the in-flight TTL lets go of it

    async def claim(self, claims: Sequence[Claim]) -> Held | Short:
        args: list[Any] = [self.backend.options.prefix, len(claims)]
        for c in claims:
            args += [c.name, c.room, c.asked, c.hold]
        reached, answer = await self._run(self._claim, args)
        if not reached:
            return await self.spare.claim(claims)
        if int(answer[0]) >= 0:
            return Short(int(answer[0]), int(answer[1]))
        return Held(granted(claims, [int(hold) for hold in answer[1:]]))

    async def unclaim(self, held: Held) -> None:
        if held.spare:
            await self.spare.counters.unclaim(held)
            return
        args: list[Any] = [self.backend.options.prefix]
        for c in held.claims:
            args += [c.name, c.hold]
        await self._run(self._unclaim, args)  # not reached: the TTL lets go of it
