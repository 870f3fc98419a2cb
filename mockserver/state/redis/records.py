"""The Redis store (``--state redis://…`` or ``--store redis://…``): responses and stored chat
completions shared by every server process, on any host, that names the same Redis.

Semantics are :class:`~mockserver.state.sqlite.records.SqliteStore`'s; each write is one Lua script,
so it is atomic in Redis. The conditional update — replace the snapshot and append the events
only if the status is one of those expected — is the whole concurrency story: a cancel from
one process and a run's completion in another are two updates expecting ``in_progress``, and
the script runs one and then the other, which then finds the status moved.

**Keys** (all under ``mockserver:{records}:``, apart from the
:class:`~mockserver.state.redis.state.RedisState` keys, so forgetting state never drops records;
``{records}`` is the hash tag that keeps them in one slot of a Redis Cluster, so every script runs
on one node — each declares the keys it can name, and the others it reaches are in that slot)::

    mockserver:{records}:r:<id>        hash: the record (kind, status, snapshot, input items,
                                       messages, flags, events count, expiry, seq, owner, and the
                                       model and string metadata that listing filters on)
    mockserver:{records}:e:<id>        sorted set: the stream events, scored by sequence number
    mockserver:{records}:order:<kind>  sorted set: ids by seq, the creation order listing pages in
    mockserver:{records}:running       set: ids whose status is queued or in_progress
    mockserver:{records}:seq           the counter seq is drawn from
    mockserver:{records}:owners:<token>  hash: one open store (pid, place, process start, heartbeat)

**Expiry.** As in SqliteStore, a record is visible until ``ttl`` seconds after its creation on
the *server's* clock (``expires`` in the hash; scripts compare it with the clock's ``now``): on
a virtual clock it goes when the clock is moved past it. Redis also drops its keys ``ttl`` real
seconds after creation so nothing is kept for ever; ids left in the order set by such keys are
swept as listing meets them. With the default ttl (30 days) the two never disagree in practice.

**Owners.** Each store is an owner (:mod:`mockserver.state.owners`): ``create`` writes the
owner key (if missing) in the same script as the record that carries its token, and a thread
renews it every ``heartbeat`` seconds with a ``lease``-second expiry — its own blocking
connection, so a busy event loop never delays it. :meth:`RedisStore.orphans` counts a record's
owner gone when the key has expired, or when :func:`~mockserver.state.owners.alive` says so
(same host: the process table; elsewhere: the heartbeat's age); never this store itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any, TypeAlias

from redis.exceptions import RedisError

from mockserver.clock import Clock
from mockserver.state.owners import LIVE, Owner, alive, place, process_start
from mockserver.state.records import Page, Query, Record, RecordKind
from mockserver.state.redis.client import Link, Script, guarded
from mockserver.wire.json import Json

__all__ = ["HEARTBEAT", "LEASE", "RedisStore"]

log = logging.getLogger("mockserver")

HEARTBEAT = 5.0  # seconds between an owner's heartbeats
LEASE = 30.0  # seconds without a heartbeat after which an owner is gone (its key expires)

RECORDS = "mockserver:{records}:"  # {records}: the hash tag, one slot for every key in a cluster
OWNERS = RECORDS + "owners:"

Arg: TypeAlias = bytes | str | int | float
Reply: TypeAlias = Any
_RUNNING = RECORDS + "running"
_SEQ = RECORDS + "seq"
# The hash fields a Record is read from, in Record's order (see _record).
_FIELDS = ("id", "response", "input_items", "messages", "background", "stream", "events", "kind")

# KEYS: record, events, order set, running set, seq counter, owner.
# ARGV: now, ttl ms, lease ms, id, kind, status, response, input items, messages, background,
# stream, expires, owner token, model, metadata, then the owner's pid, place, start, heartbeat.
_CREATE = Script(
    """
local record = KEYS[1]
local found = redis.call('HMGET', record, 'expires', 'kind')
if found[1] then
    if tonumber(found[1]) > tonumber(ARGV[1]) then
        return 0
    end
    -- Expired on the server clock: gone, and its id free again (as SqliteStore has it).
    redis.call('ZREM', KEYS[3]:gsub('[^:]*$', '') .. found[2], ARGV[4])
    redis.call('SREM', KEYS[4], ARGV[4])
end
redis.call('DEL', record, KEYS[2])
if redis.call('EXISTS', KEYS[6]) == 0 then
    redis.call('HSET', KEYS[6], 'pid', ARGV[16], 'place', ARGV[17], 'started', ARGV[18], 'heartbeat', ARGV[19])
    redis.call('PEXPIRE', KEYS[6], ARGV[3])
end
local seq = redis.call('INCR', KEYS[5])
redis.call('HSET', record, 'id', ARGV[4], 'kind', ARGV[5], 'status', ARGV[6], 'response', ARGV[7],
    'input_items', ARGV[8], 'messages', ARGV[9], 'background', ARGV[10], 'stream', ARGV[11], 'events', 0,
    'expires', ARGV[12], 'seq', seq, 'owner', ARGV[13], 'model', ARGV[14], 'meta', ARGV[15])
redis.call('PEXPIRE', record, ARGV[2])
redis.call('ZADD', KEYS[3], seq, ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
if ARGV[6] == 'queued' or ARGV[6] == 'in_progress' then
    redis.call('SADD', KEYS[4], ARGV[4])
    redis.call('PEXPIRE', KEYS[4], ARGV[2])
end
return 1
"""
)

# KEYS: record, events, running set. ARGV: now, id, status, response, model, metadata, how many
# statuses are expected, those statuses, then sequence number and body of each event.
_UPDATE = Script(
    """
local record = KEYS[1]
local found = redis.call('HMGET', record, 'status', 'kind', 'expires')
if not found[1] or found[2] ~= 'response' or tonumber(found[3]) <= tonumber(ARGV[1]) then
    return 0
end
local expected = tonumber(ARGV[7])
local ok = false
for i = 8, 7 + expected do
    if found[1] == ARGV[i] then
        ok = true
    end
end
if not ok then
    return 0
end
local added = 0
for i = 8 + expected, #ARGV, 2 do
    redis.call('ZREMRANGEBYSCORE', KEYS[2], ARGV[i], ARGV[i])
    redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i + 1])
    added = added + 1
end
if added > 0 then
    local left = redis.call('PTTL', record)
    if left > 0 then
        redis.call('PEXPIRE', KEYS[2], left)
    end
end
redis.call('HSET', record, 'status', ARGV[3], 'response', ARGV[4], 'model', ARGV[5], 'meta', ARGV[6])
redis.call('HINCRBY', record, 'events', added)
if ARGV[3] == 'queued' or ARGV[3] == 'in_progress' then
    redis.call('SADD', KEYS[3], ARGV[2])
else
    redis.call('SREM', KEYS[3], ARGV[2])
end
return 1
"""
)

# KEYS: record, events, running set, the kind's order set. ARGV: now, id, kind.
_DELETE = Script(
    """
local found = redis.call('HMGET', KEYS[1], 'kind', 'expires')
if not found[1] or found[1] ~= ARGV[3] then
    return 0
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('SREM', KEYS[3], ARGV[2])
if tonumber(found[2]) <= tonumber(ARGV[1]) then
    return 0  -- it had expired: forgotten, but there was nothing to delete
end
return 1
"""
)

# KEYS: record. ARGV: now, kind, status, response, model, metadata.
_REWRITE = Script(
    """
local found = redis.call('HMGET', KEYS[1], 'kind', 'expires')
if found[1] ~= ARGV[2] or tonumber(found[2]) <= tonumber(ARGV[1]) then
    return 0
end
redis.call('HSET', KEYS[1], 'status', ARGV[3], 'response', ARGV[4], 'model', ARGV[5], 'meta', ARGV[6])
return 1
"""
)

# One page of one kind in creation order, filtered, read atomically. KEYS: the kind's order set,
# then the record ``after`` names (if any). ARGV: records' prefix, kind, now, model ('' and a 0
# flag for any), after ('' and a 0 flag for none), limit, 'asc' or 'desc', then metadata key and
# value pairs. Returns -1 when ``after`` names no live record of
# the kind, else {has_more, record fields…, record fields…}. Ids whose record Redis already
# dropped are removed from the order set as they are met.
_FIND = Script(
    """
local prefix, kind, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local model, any_model = ARGV[4], ARGV[5] == '0'
local limit, desc = tonumber(ARGV[8]), ARGV[9] == 'desc'
local order = KEYS[1]
local bound = desc and '+inf' or '-inf'
if ARGV[7] == '1' then
    local after = redis.call('HMGET', KEYS[2], 'kind', 'expires', 'seq')
    if after[1] ~= kind or tonumber(after[2]) <= now then
        return -1
    end
    bound = '(' .. after[3]
end
local found = {0}
while true do
    local ids
    if desc then
        ids = redis.call('ZRANGE', order, bound, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 200, 'WITHSCORES')
    else
        ids = redis.call('ZRANGE', order, bound, '+inf', 'BYSCORE', 'LIMIT', 0, 200, 'WITHSCORES')
    end
    if #ids == 0 then
        return found
    end
    for i = 1, #ids, 2 do
        bound = '(' .. ids[i + 1]
        local key = prefix .. 'r:' .. ids[i]
        local record = redis.call('HMGET', key, 'expires', 'model', 'meta')
        if not record[1] then
            redis.call('ZREM', order, ids[i])
        elseif tonumber(record[1]) > now and (any_model or record[2] == model) then
            local admitted = true
            if #ARGV > 9 then
                local meta = cjson.decode(record[3])
                for j = 10, #ARGV, 2 do
                    if meta[ARGV[j]] ~= ARGV[j + 1] then
                        admitted = false
                    end
                end
            end
            if admitted then
                if #found > limit then
                    found[1] = 1
                    return found
                end
                found[#found + 1] = redis.call('HMGET', key, FIELDS)
            end
        end
    end
end
""".replace("FIELDS", ", ".join(f"'{name}'" for name in _FIELDS))
)

# Every record and its events, and the indexes, at once (``/__mockserver/reset``): walked from
# the order sets, which outlive their records, rather than SCANning a shared database. ARGV:
# the records' prefix. KEYS: the running set, the seq counter, then each kind's order set.
_CLEAR = Script(
    """
local prefix = ARGV[1]
for k = 3, #KEYS do
    local order = KEYS[k]
    local ids = redis.call('ZRANGE', order, 0, -1)
    for i = 1, #ids, 500 do
        local keys = {}
        for j = i, math.min(i + 499, #ids) do
            keys[#keys + 1] = prefix .. 'r:' .. ids[j]
            keys[#keys + 1] = prefix .. 'e:' .. ids[j]
        end
        redis.call('UNLINK', unpack(keys))
    end
    redis.call('UNLINK', order)
end
redis.call('UNLINK', KEYS[1], KEYS[2])
return 1
"""
)

_KINDS: tuple[RecordKind, ...] = ("response", "chat.completion")


def _dumps(obj: Any) -> bytes:
    """Compact JSON as UTF-8 (a lone surrogate a request echoes is kept as its \\u escape)."""
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":")).encode()


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # compared byte for byte in Lua, never decoded


def _filters(response: Json) -> tuple[bytes, bytes]:
    """What :meth:`RedisStore.find` filters on: the model (if a string) and the string-valued
    metadata pairs, as raw UTF-8 JSON so Lua's cjson compares the same bytes a query sends."""
    model = response.get("model")
    metadata = response.get("metadata")
    pairs = {k: v for k, v in metadata.items() if isinstance(v, str)} if isinstance(metadata, dict) else {}
    meta = json.dumps(pairs, separators=(",", ":"), ensure_ascii=False)
    # "=" first: an empty model name is not the same as none.
    return (b"=" + _utf8(model) if isinstance(model, str) else b""), _utf8(meta)


def _record(fields: Sequence[Reply]) -> Record:
    record_id, response, items, messages, background, stream, events, kind = fields
    return Record(
        record_id.decode(),
        json.loads(response),
        tuple(json.loads(items)),
        tuple((role, text) for role, text in json.loads(messages)),
        background == b"1",
        stream == b"1",
        int(events),
        kind.decode(),
    )


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class RedisStore:
    shared = True  # other processes may run the responses it holds (the lifecycle looks for orphans)

    def __init__(
        self,
        url: str,
        clock: Clock,
        ttl: float = 2_592_000.0,
        *,
        heartbeat: float = HEARTBEAT,
        lease: float = LEASE,
        link: Link | None = None,
    ) -> None:
        self._clock = clock
        self._ttl = ttl
        self._link = link if link is not None else Link(url)
        self.token = uuid.uuid4().hex  # this store's owner token
        self._owner_key = OWNERS + self.token
        self._heartbeat = heartbeat
        self._lease = lease
        self._stop = threading.Event()
        self._beats: threading.Thread | None = None

    # ---- the owner ----------------------------------------------------------------------

    def _owner(self) -> tuple[Arg, ...]:
        """This owner's fields (pid, place, start, heartbeat), as the owner key holds them."""
        return (os.getpid(), _utf8(place()), process_start() or "", time.time())

    def _start_heartbeat(self) -> None:
        if self._beats is None:
            LIVE.add(self.token)
            self._stop.clear()
            self._beats = threading.Thread(target=self._beat, name="mockserver-store-heartbeat", daemon=True)
            self._beats.start()

    def _beat(self) -> None:
        """The heartbeat thread: renew the owner key until the store closes (rewritten whole,
        so a key that expired meanwhile — Redis was away — comes back)."""
        redis = self._link.blocking()
        try:
            while not self._stop.wait(self._heartbeat):
                pid, where, start, now = self._owner()
                try:
                    pipe = redis.pipeline(transaction=False)
                    pipe.execute_command(
                        "HSET", self._owner_key, "pid", pid, "place", where, "started", start, "heartbeat", now
                    )
                    pipe.execute_command("PEXPIRE", self._owner_key, _ms(self._lease))
                    pipe.execute()
                except RedisError as exc:  # Redis away (it tries again), or an ACL that forbids it
                    log.warning("the response store's heartbeat failed (it tries again): %s", exc)
        finally:
            redis.close()

    async def _pipeline(self, *commands: Sequence[Arg]) -> list[Reply]:
        return await self._link.pipeline(commands)

    @guarded
    async def orphans(self, ids: Sequence[str] | None = None) -> list[Record]:
        """Responses ``queued`` or ``in_progress`` whose owner is gone (of ``ids``, or all),
        oldest first. A full look (no ``ids``) also deletes the keys of owners found gone and
        drops ids of records Redis has dropped from the running set."""
        if ids is not None and not ids:
            return []
        now, wall = self._clock.now(), time.time()
        if ids is None:
            ids = [member.decode() for member in await self._link.client().execute_command("SMEMBERS", _RUNNING)]
        else:
            ids = list(dict.fromkeys(ids))  # each once, as SQL's IN has it
        wanted = ("status", "kind", "expires", "seq", "owner", *_FIELDS)
        rows = await self._pipeline(*(("HMGET", RECORDS + "r:" + i, *wanted) for i in ids))
        running: list[tuple[int, bytes, Record]] = []
        vanished: list[str] = []  # ids whose record Redis dropped (its real-time expiry)
        for record_id, row in zip(ids, rows, strict=True):
            status, kind, expires, seq, owner = row[:5]
            if status is None:
                vanished.append(record_id)
            elif kind == b"response" and status in (b"queued", b"in_progress") and float(expires) > now:
                running.append((int(seq), owner or b"", _record(row[5:])))
        mine = self.token.encode()
        tokens = sorted({owner for _, owner, _ in running if owner and owner != mine})
        found = await self._pipeline(
            *(("HMGET", OWNERS + t.decode(), "pid", "place", "started", "heartbeat") for t in tokens)
        )
        gone = {b""}  # a record without an owner counts as orphaned, as in SqliteStore
        expired: list[bytes] = []  # owners whose key is there but whose process is not
        for token, (pid, where, started, beat) in zip(tokens, found, strict=True):
            if pid is None:  # the lease expired: nobody renews it
                gone.add(token)
                continue
            start = started.decode() or None
            owner = Owner(token.decode(), int(pid), where.decode("utf-8", "surrogatepass"), start, float(beat))
            if not alive(owner, wall, self._lease):
                gone.add(token)
                expired.append(token)
        cleanup: list[tuple[str, ...]] = []
        if vanished:
            cleanup.append(("SREM", _RUNNING, *vanished))
        if expired:
            cleanup.append(("DEL", *(OWNERS + t.decode() for t in expired)))
        if cleanup:
            await self._pipeline(*cleanup)
        running.sort(key=lambda found: found[0])
        return [record for _, owner, record in running if owner in gone]

    # ---- records ------------------------------------------------------------------------

    @guarded
    async def create(self, record: Record) -> bool:
        now = self._clock.now()
        model, meta = _filters(record.response)
        self._start_heartbeat()  # the owner key is written by the script itself, with the record
        created = await _CREATE.run(
            self._link.client(),
            (
                RECORDS + "r:" + record.id,
                RECORDS + "e:" + record.id,
                RECORDS + "order:" + record.kind,
                _RUNNING,
                _SEQ,
                self._owner_key,
            ),
            (
                now,
                _ms(self._ttl),
                _ms(self._lease),
                record.id,
                record.kind,
                record.status,
                _dumps(record.response),
                _dumps(record.input_items),
                _dumps(record.messages),
                int(record.background),
                int(record.stream),
                now + self._ttl,
                self.token,
                model,
                meta,
                *self._owner(),
            ),
        )
        return bool(created)

    @guarded
    async def get(self, response_id: str, kind: RecordKind = "response") -> Record | None:
        row = await self._link.client().execute_command("HMGET", RECORDS + "r:" + response_id, "expires", *_FIELDS)
        if row[0] is None or float(row[0]) <= self._clock.now() or row[8] != kind.encode():
            return None
        return _record(row[1:])

    @guarded
    async def update(self, response_id: str, response: Json, events: Sequence[Json], expect: frozenset[str]) -> bool:
        model, meta = _filters(response)
        args: list[Arg] = [
            self._clock.now(),
            response_id,
            str(response["status"]),
            _dumps(response),
            model,
            meta,
            len(expect),
            *sorted(expect),
        ]
        for event in events:
            args += (int(event["sequence_number"]), _dumps(event))
        keys = (RECORDS + "r:" + response_id, RECORDS + "e:" + response_id, _RUNNING)
        return bool(await _UPDATE.run(self._link.client(), keys, args))

    @guarded
    async def events(self, response_id: str, after: int) -> list[Json]:
        found = await self._link.client().execute_command(
            "ZRANGE", RECORDS + "e:" + response_id, f"({after}", "+inf", "BYSCORE"
        )
        return [json.loads(body) for body in found]

    @guarded
    async def delete(self, response_id: str, kind: RecordKind = "response") -> bool:
        keys = (RECORDS + "r:" + response_id, RECORDS + "e:" + response_id, _RUNNING, RECORDS + "order:" + kind)
        args = (self._clock.now(), response_id, kind)
        return bool(await _DELETE.run(self._link.client(), keys, args))

    @guarded
    async def rewrite(self, record_id: str, obj: Json, kind: RecordKind) -> bool:
        model, meta = _filters(obj)
        status = str(obj.get("status", "")) if kind == "response" else ""
        args = (self._clock.now(), kind, status, _dumps(obj), model, meta)
        return bool(await _REWRITE.run(self._link.client(), (RECORDS + "r:" + record_id,), args))

    @guarded
    async def find(self, query: Query) -> Page | None:
        args: list[Arg] = [
            RECORDS,
            query.kind,
            self._clock.now(),
            b"=" + _utf8(query.model) if query.model is not None else b"",
            0 if query.model is None else 1,
            query.after or "",
            0 if query.after is None else 1,
            query.limit,
            query.order,
        ]
        for key, value in query.metadata:
            args += (_utf8(key), _utf8(value))
        keys = [RECORDS + "order:" + query.kind]
        if query.after is not None:
            keys.append(RECORDS + "r:" + query.after)
        found = await _FIND.run(self._link.client(), keys, args)
        if found == -1:
            return None
        return Page(tuple(_record(fields) for fields in found[1:]), bool(found[0]))

    @guarded
    async def clear(self) -> None:
        keys = (_RUNNING, _SEQ, *(RECORDS + "order:" + kind for kind in _KINDS))
        await _CLEAR.run(self._link.client(), keys, (RECORDS,))

    async def close(self) -> None:
        """Stop heartbeating and remove this store's owner key: whatever it left running is an
        orphan from now on, for any other process to fail."""
        self._stop.set()
        LIVE.discard(self.token)
        if self._beats is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._beats.join, 5.0)
            self._beats = None
            try:
                await self._link.client().execute_command("DEL", self._owner_key)
            except RedisError as exc:
                log.warning("the response store could not remove its owner key: %s", exc)
        await self._link.close()
