"""``--state redis://…`` (or ``redis+cluster://…``, ``redis+sentinel://…``): the state in Redis, shared
by every process (and host) that names it, spoken through redis-py (:mod:`~mockserver.state.redis.client`).

Each operation of :class:`~mockserver.state.base.State` is one Redis command or one Lua script —
atomic in Redis, so no process ever reads, modifies and writes back — and one round trip:

========== ==================================================================================
get/put    GET / SET (``ttl`` → PX) / DEL
add        INCRBY (a counter reads back as its decimal digits, as in memory)
exchange   a script: MGET of the reads and one INCR per count
maps       HSET / HDEL / HGETALL
push       a script: RPUSH then LTRIM to the newest ``cap``
draw       a script: the token-bucket rule of :func:`~mockserver.state.base.refill` for every
           bucket, all charged or none (buckets are hashes ``{level, at}``)
forget     SCAN MATCH (the prefix's glob characters escaped) and UNLINK, a batch at a time
========== ==================================================================================

**Keys.** Everything lives under ``mockserver:{state}:`` so a database shared with other data is
safe, and in a Redis Cluster every key is in the one slot of the hash tag ``{state}``: the
scripts and multi-key commands above never cross slots, and :meth:`RedisState.forget` scans one
node. Memory keeps values, maps, lists and buckets apart (one name may be all four); Redis has
one key space, so each kind gets a letter: ``mockserver:{state}:v:<key>``, ``…:m:<key>``,
``…:l:<key>``, ``…:b:<key>``. One pattern, ``mockserver:{state}:?:<prefix>*``, then finds every
kind for :meth:`RedisState.forget` — and never the records, which the
:class:`~mockserver.state.redis.records.RedisStore` keeps under ``mockserver:{records}:``.

**Buckets** hold their level and the time it was measured (the caller's clock); an idle bucket
expires once it would be full again (PEXPIRE), since a missing bucket starts full. That expiry
counts real milliseconds: on a virtual clock that stands still, a bucket left idle for longer
than it takes to refill is full again, where memory would keep it as it was.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mockserver.state.base import TOLERANCE, Draw, Drawn
from mockserver.state.records import Store
from mockserver.state.redis.client import Link, Script, guarded
from mockserver.state.urls import hidden

__all__ = ["PREFIX", "RedisState"]

PREFIX = "mockserver:{state}:"  # {state}: the hash tag, one slot for every key in a cluster
_VALUE, _MAP, _LIST, _BUCKET = (f"{PREFIX}{kind}:" for kind in "vmlb")
_GLOB = re.compile(r"([*?\[\]\\])")
_BATCH = 500  # keys SCAN is asked for, and UNLINKed, at a time

# MGET of the first ARGV[1] keys, then INCR of each of the rest: a request's reads and counts in one
# round trip. A missing value is false in Lua's table (no hole) and nil in the reply.
_EXCHANGE = Script(
    """
local reads = tonumber(ARGV[1])
local out = {}
if reads > 0 then
    out = redis.call('MGET', unpack(KEYS, 1, reads))
end
for i = reads + 1, #KEYS do
    out[i] = redis.call('INCR', KEYS[i])
end
return out
"""
)

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


def _text(reply: Any) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


class RedisState:
    shared = True

    def __init__(self, url: str, records: Store, *, link: Link | None = None) -> None:
        self.url = hidden(url)
        self.records = records
        self._link = link if link is not None else Link(url)

    @guarded
    async def get(self, key: str) -> bytes | None:
        value: bytes | None = await self._link.client().execute_command("GET", _VALUE + key)
        return value

    @guarded
    async def put(self, key: str, value: bytes, ttl: float | None = None) -> None:
        redis = self._link.client()
        if ttl is None:
            await redis.execute_command("SET", _VALUE + key, value)
        elif ttl > 0:
            await redis.execute_command("SET", _VALUE + key, value, "PX", max(1, round(ttl * 1000)))
        else:  # already expired, as memory has it (Redis refuses PX 0)
            await redis.execute_command("DEL", _VALUE + key)

    @guarded
    async def delete(self, key: str) -> bool:
        return bool(await self._link.client().execute_command("DEL", _VALUE + key))

    @guarded
    async def add(self, key: str, by: int = 1) -> int:
        number: int = await self._link.client().execute_command("INCRBY", _VALUE + key, by)
        return number

    @guarded
    async def exchange(
        self, read: Sequence[str] = (), count: Sequence[str] = ()
    ) -> tuple[list[bytes | None], list[int]]:
        if not read and not count:
            return [], []
        keys = [_VALUE + key for key in read] + [_VALUE + key for key in count]
        replies: list[Any] = await _EXCHANGE.run(self._link.client(), keys, (len(read),))
        return replies[: len(read)], replies[len(read) :]

    @guarded
    async def map_put(self, key: str, field: str, value: bytes) -> None:
        await self._link.client().execute_command("HSET", _MAP + key, field, value)

    @guarded
    async def map_delete(self, key: str, field: str) -> bool:
        return bool(await self._link.client().execute_command("HDEL", _MAP + key, field))

    @guarded
    async def map_all(self, key: str) -> dict[str, bytes]:
        found = await self._link.client().execute_command("HGETALL", _MAP + key)
        if isinstance(found, dict):  # a redis-py client's reply (the cluster's): already paired
            return {name.decode(): value for name, value in found.items()}
        return {found[i].decode(): found[i + 1] for i in range(0, len(found), 2)}

    @guarded
    async def push(self, key: str, value: bytes, cap: int) -> None:
        await _PUSH.run(self._link.client(), (_LIST + key,), (value, cap))

    @guarded
    async def items(self, key: str, newest: int | None = None) -> list[bytes]:
        if newest is not None and newest <= 0:
            return []
        start = 0 if newest is None else -newest
        found: list[bytes] = await self._link.client().execute_command("LRANGE", _LIST + key, start, -1)
        return found

    @guarded
    async def draw(self, draws: Sequence[Draw], now: float) -> Drawn:
        if not draws:
            return Drawn(True, (), 0.0, -1)
        args: list[float] = [now, TOLERANCE]  # as repr() writes them: Lua reads back the same doubles
        for d in draws:
            args += (float(d.capacity), float(d.rate), float(d.amount))
        reply = await _DRAW.run(self._link.client(), [_BUCKET + d.key for d in draws], [repr(a) for a in args])
        allowed, wait, short = bool(reply[0]), float(_text(reply[1])), int(reply[2])
        return Drawn(allowed, tuple(float(_text(level)) for level in reply[3:]), wait, short)

    @guarded
    async def forget(self, prefix: str) -> None:
        redis = self._link.client()
        pattern = f"{PREFIX}?:{_glob(prefix)}*"
        # In a cluster every key of ours is on the node that serves {state}'s slot: scan that one.
        where = {"target_nodes": await self._node(redis)} if self._link.cluster else {}
        cursor: Any = 0
        while True:
            found = await redis.execute_command("SCAN", cursor, "MATCH", pattern, "COUNT", _BATCH, **where)
            cursor, keys = found
            if isinstance(cursor, dict):  # the cluster client's: a cursor by node, of which there is one
                (cursor,) = cursor.values()
            if keys:
                await redis.execute_command("UNLINK", *keys)
            if int(cursor) == 0:
                return

    @guarded
    async def ping(self) -> None:
        redis = self._link.client()
        if self._link.cluster:  # the node that holds our keys, and the map of the slots on the way
            await redis.execute_command("PING", target_nodes=await self._node(redis))
        else:
            await redis.execute_command("PING")

    @staticmethod
    async def _node(redis: Any) -> Any:
        """The cluster node that serves our keys' one slot (the map of the slots read first)."""
        await redis.initialize()  # once: nothing to do when the client has the map already
        return redis.get_node_from_key(PREFIX)

    async def close(self) -> None:
        await self._link.close()  # not the records: the Responses lifecycle closes those
