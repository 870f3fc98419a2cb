"""``--state redis://…``: the state in Redis, shared by every process (and host) that names it.

Each operation of :class:`~mockserver.state.base.State` is one Redis command, one pipelined
write, or one Lua script — atomic in Redis, so no process ever reads, modifies and writes back:

========== ==================================================================================
get/put    GET / SET (``ttl`` → PX) / DEL
add        INCRBY (a counter reads back as its decimal digits, as in memory)
exchange   MGET of the reads and one INCR per count, pipelined: one round trip, each INCR atomic
maps       HSET / HDEL / HGETALL
push       a script: RPUSH then LTRIM to the newest ``cap``
draw       a script: the token-bucket rule of :func:`~mockserver.state.base.refill` for every
           bucket, all charged or none (buckets are hashes ``{level, at}``)
forget     SCAN MATCH (the prefix's glob characters escaped) and UNLINK, a batch at a time
========== ==================================================================================

**Keys.** Everything lives under ``mockserver:`` so a database shared with other data is safe.
Memory keeps values, maps, lists and buckets apart (one name may be all four); Redis has one
key space, so each kind gets a letter: ``mockserver:v:<key>``, ``mockserver:m:<key>``,
``mockserver:l:<key>``, ``mockserver:b:<key>``. One pattern, ``mockserver:?:<prefix>*``, then
finds every kind for :meth:`RedisState.forget` — and never the records, which the
:class:`~mockserver.responses.redis.RedisStore` keeps under ``mockserver:records:``.

**Buckets** hold their level and the time it was measured (the caller's clock); an idle bucket
expires once it would be full again (PEXPIRE), since a missing bucket starts full. That expiry
counts real milliseconds: on a virtual clock that stands still, a bucket left idle for longer
than it takes to refill is full again, where memory would keep it as it was.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mockserver.responses.store import Store
from mockserver.state.base import TOLERANCE, Draw, Drawn
from mockserver.state.resp import Client, Reply, Script
from mockserver.state.urls import hidden

__all__ = ["PREFIX", "RedisState"]

PREFIX = "mockserver:"
_VALUE, _MAP, _LIST, _BUCKET = (f"{PREFIX}{kind}:" for kind in "vmlb")
_GLOB = re.compile(r"([*?\[\]\\])")
_BATCH = 500  # keys SCAN is asked for, and UNLINKed, at a time

# RPUSH and LTRIM as one step, so no reader ever sees the list over its cap.
_PUSH = Script(
    """
local cap = tonumber(ARGV[2])
if cap <= 0 then
    redis.call('DEL', KEYS[1])
    return 0
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], -cap, -1)
return 1
"""
)

# The token buckets: memory.py's draw, line for line, in Lua (doubles both sides, so the same
# arithmetic gives the same levels). ARGV: now, tolerance, then capacity, rate, amount for each
# bucket in KEYS. Numbers go back as %.17g strings: Lua numbers in a reply become integers.
_DRAW = Script(
    """
local now = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local n = #KEYS
local levels, waits = {}, {}
local wait, short = 0.0, 0
for i = 1, n do
    local capacity = tonumber(ARGV[3 * i])
    local rate = tonumber(ARGV[3 * i + 1])
    local amount = tonumber(ARGV[3 * i + 2])
    local saved = redis.call('HMGET', KEYS[i], 'level', 'at')
    local level, at = capacity, now
    if saved[1] then
        level, at = tonumber(saved[1]), tonumber(saved[2])
    end
    level = math.min(capacity, level + math.max(0.0, now - at) * rate)
    levels[i] = level
    if level + tolerance >= amount then
        waits[i] = 0.0
    else
        waits[i] = (amount - level) / rate
    end
    if waits[i] > wait then
        wait, short = waits[i], i
    end
end
local allowed = wait <= 0.0
local out = {allowed and 1 or 0, string.format('%.17g', wait), allowed and -1 or short - 1}
for i = 1, n do
    local capacity = tonumber(ARGV[3 * i])
    local rate = tonumber(ARGV[3 * i + 1])
    local level = levels[i]
    if allowed then
        level = level - tonumber(ARGV[3 * i + 2])
    end
    local text = string.format('%.17g', level)
    redis.call('HSET', KEYS[i], 'level', text, 'at', ARGV[1])
    if rate > 0 then
        -- Gone once it would be full again: a bucket never seen starts full anyway.
        local full = math.ceil(math.max(0.0, capacity - level) / rate * 1000)
        redis.call('PEXPIRE', KEYS[i], math.max(1, full))
    end
    out[#out + 1] = text
end
return out
"""
)


def _glob(prefix: str) -> str:
    """``prefix`` as a SCAN MATCH pattern matches it literally."""
    return _GLOB.sub(r"\\\1", prefix)


def _text(reply: Reply) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


class RedisState:
    shared = True

    def __init__(self, url: str, records: Store, *, client: Client | None = None) -> None:
        self.url = hidden(url)
        self.records = records
        self._redis = client if client is not None else Client(url)

    async def get(self, key: str) -> bytes | None:
        value: bytes | None = await self._redis.call("GET", _VALUE + key)
        return value

    async def put(self, key: str, value: bytes, ttl: float | None = None) -> None:
        if ttl is None:
            await self._redis.call("SET", _VALUE + key, value)
        elif ttl > 0:
            await self._redis.call("SET", _VALUE + key, value, "PX", max(1, round(ttl * 1000)))
        else:  # already expired, as memory has it (Redis refuses PX 0)
            await self._redis.call("DEL", _VALUE + key)

    async def delete(self, key: str) -> bool:
        return bool(await self._redis.call("DEL", _VALUE + key))

    async def add(self, key: str, by: int = 1) -> int:
        number: int = await self._redis.call("INCRBY", _VALUE + key, by)
        return number

    async def exchange(
        self, read: Sequence[str] = (), count: Sequence[str] = ()
    ) -> tuple[list[bytes | None], list[int]]:
        commands: list[tuple[str, ...]] = [("INCR", _VALUE + key) for key in count]
        if read:
            commands.insert(0, ("MGET", *(_VALUE + key for key in read)))
        if not commands:
            return [], []
        replies = await self._redis.pipeline(*commands)
        if read:
            return replies[0], replies[1:]
        return [], replies

    async def map_put(self, key: str, field: str, value: bytes) -> None:
        await self._redis.call("HSET", _MAP + key, field, value)

    async def map_delete(self, key: str, field: str) -> bool:
        return bool(await self._redis.call("HDEL", _MAP + key, field))

    async def map_all(self, key: str) -> dict[str, bytes]:
        flat: list[bytes] = await self._redis.call("HGETALL", _MAP + key)
        return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}

    async def push(self, key: str, value: bytes, cap: int) -> None:
        await self._redis.run(_PUSH, (_LIST + key,), (value, cap))

    async def items(self, key: str) -> list[bytes]:
        found: list[bytes] = await self._redis.call("LRANGE", _LIST + key, 0, -1)
        return found

    async def draw(self, draws: Sequence[Draw], now: float) -> Drawn:
        if not draws:
            return Drawn(True, (), 0.0, -1)
        args: list[float] = [now, TOLERANCE]  # as repr() writes them: Lua reads back the same doubles
        for d in draws:
            args += (float(d.capacity), float(d.rate), float(d.amount))
        reply = await self._redis.run(_DRAW, [_BUCKET + d.key for d in draws], args)
        allowed, wait, short = bool(reply[0]), float(_text(reply[1])), int(reply[2])
        return Drawn(allowed, tuple(float(_text(level)) for level in reply[3:]), wait, short)

    async def forget(self, prefix: str) -> None:
        pattern = f"{PREFIX}?:{_glob(prefix)}*"
        cursor = b"0"
        while True:
            cursor, keys = await self._redis.call("SCAN", cursor, "MATCH", pattern, "COUNT", _BATCH)
            if keys:
                await self._redis.call("UNLINK", *keys)
            if cursor == b"0":
                return

    async def ping(self) -> None:
        await self._redis.call("PING")

    async def close(self) -> None:
        await self._redis.close()  # not the records: the Responses lifecycle closes those
