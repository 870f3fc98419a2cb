"""Commands written together: what the callers of one event loop ask Redis in one turn of the
loop goes out in one write on one connection, and each caller is answered its own replies.

Why: the write is most of what a Redis command costs this process (a system call, and on the
loopback the receiving side's work as well), and a busy server's requests reach Redis in the same
turn — sixteen commands asked at once cost one write and usually one read, not sixteen of each.
Round trips are unchanged: a caller waits for its own replies only, never for a later turn's.

* :class:`Connections` — one Redis: one connection (opened again when lost), its commands in
  flight in order (:class:`_Pipe`), written by one task per event loop.
* :class:`ClusterConnections` — a Redis Cluster: a :class:`Connections` per node, each command
  sent to the node that serves its key's slot (every key of the engine carries a hash tag, so
  each command and each caller's group of commands has one slot). redis-py's cluster client
  keeps the map of the slots, and answers what has no key or names its node.

Replies are redis-py's raw ones, read by redis-py (hiredis when installed); logging in, TLS and
RESP are redis-py's. The errors are redis-py's, raised to the callers: an error reply to its caller
alone; a connection lost, refused or silent (no reply within ``timeout`` of the last) to every
caller with a command in flight on it — their state is unknown — and the next write opens a new
connection. :mod:`~mockserver.state.redis.client` turns them into StateUnavailable.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import redis.asyncio
import redis.asyncio.cluster
from redis.crc import key_slot
from redis.exceptions import AskError, MovedError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

__all__ = ["ClusterConnections", "Connections", "pack"]


class _Call:
    """One caller's commands on a pipe: its future, how many replies it waits for, those come."""

    __slots__ = ("future", "replies", "size")

    def __init__(self, future: asyncio.Future[list[Any]], size: int) -> None:
        self.future = future
        self.size = size
        self.replies: list[Any] = []


class _Pipe:
    """One connection with commands in flight on it, in the order written, and the task that
    reads their replies (always reading: a connection the server closes is seen at once, not
    at the next command). A reply that does not come within ``timeout`` of the last one breaks
    the pipe, and so does anything but an error reply: every command in flight fails with it
    (its state is unknown) and the next write opens a new connection."""

    def __init__(self, connection: Any, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self.connection = connection
        self.broken = False
        self._loop = loop
        self._timeout = timeout
        self._inflight: collections.deque[_Call] = collections.deque()
        self._progress = 0.0  # loop.time() of the last reply, or of the first write after a lull
        self._watch: asyncio.TimerHandle | None = None
        self._reader = loop.create_task(self._read())

    def expect(self, calls: list[_Call]) -> None:
        """``calls`` are about to be written: their replies come after those already in flight."""
        if not self._inflight:
            self._progress = self._loop.time()
        self._inflight.extend(calls)
        if self._watch is None:  # one timer for the pipe, not one per command
            self._watch = self._loop.call_later(self._timeout, self._check)

    def _check(self) -> None:
        self._watch = None
        if not self._inflight or self.broken:
            return
        quiet = self._loop.time() - self._progress
        if quiet >= self._timeout:
            self.close(TimeoutError(f"no reply within {self._timeout:g} s"))
        else:
            self._watch = self._loop.call_later(self._timeout - quiet, self._check)

    async def _read(self) -> None:
        read, inflight, loop = self.connection.read_response, self._inflight, self._loop
        try:
            while True:
                reply: Any
                try:
                    reply = await read(timeout=math.inf)
                except ResponseError as exc:  # an error reply: that caller's alone
                    reply = exc
                self._progress = loop.time()
                call = inflight[0]
                call.replies.append(reply)
                if len(call.replies) == call.size:
                    inflight.popleft()
                    if not call.future.done():  # else its caller was cancelled: the reply is dropped
                        call.future.set_result(call.replies)
        except asyncio.CancelledError:
            raise  # closed by close(), which failed the calls in flight
        except Exception as exc:  # lost (redis-py has disconnected it), or a reply nobody asked for
            self.close(exc)
            await self.connection.disconnect(nowait=True)

    def close(self, why: BaseException) -> None:
        """Break the pipe: every call in flight fails with ``why``; the connection is dropped."""
        if self.broken:
            return
        self.broken = True
        if self._watch is not None:
            self._watch.cancel()
        for call in self._inflight:
            if not call.future.done():
                call.future.set_exception(why)
        self._inflight.clear()
        if self._reader is not asyncio.current_task():
            self._reader.cancel()  # redis-py disconnects a connection whose read is cancelled

    async def aclose(self) -> None:
        self.close(RedisConnectionError("closed"))
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self.connection.disconnect(nowait=True)


class Connections:
    """Commands to one Redis from one event loop (the one that makes it), written together on
    connections ``factory`` makes (its ``socket_timeout`` None: :class:`_Pipe` keeps the time)."""

    def __init__(self, factory: redis.asyncio.ConnectionPool, timeout: float, *, closing: Sequence[Any] = ()) -> None:
        self._factory = factory
        self._closing = list(closing)  # clients closed with this one (the Sentinels' own)
        self._loop = asyncio.get_running_loop()
        self._timeout = timeout
        self._calls: list[_Call] = []  # asked this turn, to be written
        self._chunks: list[bytes] = []
        self._pipe: _Pipe | None = None
        self._writer: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None

    async def execute_command(self, *args: Any) -> Any:
        call = self._queue(pack(args), 1)
        reply = (await call.future)[0]
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    async def execute_many(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """The commands written together, their replies in order; the first error reply is
        raised once all have come (every command ran: it is not a transaction)."""
        call = self._queue(b"".join(pack(command) for command in commands), len(commands))
        replies = await call.future
        for reply in replies:
            if isinstance(reply, ResponseError):
                raise reply
        return replies

    def _queue(self, packed: bytes, size: int) -> _Call:
        call = _Call(self._loop.create_future(), size)
        self._calls.append(call)
        self._chunks.append(packed)
        if self._writer is None:
            self._writer = self._loop.create_task(self._write())
        elif self._wake is not None:
            wake, self._wake = self._wake, None
            wake.set_result(None)  # the writer runs after every task ready this turn has asked
        return call

    async def _write(self) -> None:
        while True:
            if not self._calls:
                self._wake = self._loop.create_future()
                await self._wake
            calls, chunks = self._calls, self._chunks
            self._calls, self._chunks = [], []
            pipe = self._pipe
            try:
                if pipe is None or pipe.broken:
                    pipe = None
                    connection = self._factory.make_connection()  # type: ignore[no-untyped-call]
                    try:  # the login's replies too: a server that accepts and never answers
                        async with asyncio.timeout(self._timeout):
                            await connection.connect()
                    except TimeoutError:
                        await connection.disconnect(nowait=True)
                        raise TimeoutError(f"no reply within {self._timeout:g} s") from None
                    pipe = self._pipe = _Pipe(connection, self._loop, self._timeout)
                pipe.expect(calls)
                await pipe.connection.send_packed_command(chunks, check_health=False)
            except BaseException as exc:  # cannot connect, the write failed, or closed: these calls fail
                why = exc if isinstance(exc, Exception) else RedisConnectionError("closed")
                for call in calls:
                    if not call.future.done():
                        call.future.set_exception(why)
                if pipe is not None:
                    pipe.close(why)
                if not isinstance(exc, Exception):
                    raise

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None
        closed = RedisConnectionError("closed")
        for call in self._calls:
            if not call.future.done():
                call.future.set_exception(closed)
        self._calls, self._chunks = [], []
        if self._pipe is not None:
            await self._pipe.aclose()
            self._pipe = None
        closing, self._closing = self._closing, []
        for client in closing:
            await client.aclose()


def pack(command: Sequence[Any]) -> bytes:
    """``command`` as RESP (an array of bulk strings), as redis-py's encoder writes it (str as
    UTF-8, int in decimal, float by repr). Ours because redis-py's ``pack_command`` costs twice
    as much (it cuts big values into separate chunks, for a zero-copy write we do not need)."""
    out = [b"*%d\r\n" % len(command)]
    for arg in command:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int) and not isinstance(arg, bool):
            arg = b"%d" % arg
        elif isinstance(arg, float):
            arg = repr(arg).encode()
        elif not isinstance(arg, bytes | bytearray | memoryview):
            raise TypeError(f"cannot send {type(arg).__name__} to Redis: {arg!r}")
        out.append(b"$%d\r\n%b\r\n" % (len(arg), arg))
    return b"".join(out)


_REDIRECTS = (MovedError, AskError)  # the slot is served elsewhere: the command did not run


class ClusterConnections:
    """Commands to a Redis Cluster from one event loop, written together per node: each goes to
    the node that serves the slot of its first key (``node`` makes a node's connection factory).

    A command without a key, or with redis-py's options (``target_nodes=``), is redis-py's
    cluster client's to send. A redirect (the slot moved: a resharding, a replica promoted)
    reads the map of the slots again and sends the command once more, where the map now says.
    A node that cannot be reached makes the map read again before the next command too."""

    def __init__(
        self,
        cluster: redis.asyncio.cluster.RedisCluster,
        node: Callable[[str, int], redis.asyncio.ConnectionPool],
        timeout: float,
    ) -> None:
        self.cluster = cluster
        self._node = node
        self._timeout = timeout
        self._nodes: dict[str, Connections] = {}
        self._mapped = False  # the map of the slots read (again, after a failure)
        self._started = False  # redis-py's client initialized (its first map)
        self._generation = 0  # maps read so far
        self._mapping = asyncio.Lock()

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        key = _first_key(args)
        if options or key is None:
            return await self.cluster.execute_command(*args, **options)
        node, seen = await self._for(key)
        try:
            return await node.execute_command(*args)
        except _REDIRECTS:
            await self._remap(seen)
            return await (await self._for(key))[0].execute_command(*args)
        except (RedisConnectionError, OSError, TimeoutError):
            self._mapped = False  # a node down: a replica may be serving its slots next time
            raise

    async def execute_many(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """A caller's group: its commands share a slot (the engine's keys do), else redis-py's
        cluster pipeline sends them (one round trip per node)."""
        keys = [_first_key(command) for command in commands]
        first = keys[0]
        if first is None or any(key is None or key_slot(key) != key_slot(first) for key in keys):
            pipe = self.cluster.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            replies: list[Any] = await pipe.execute()
            return replies
        node, seen = await self._for(first)
        try:
            return await node.execute_many(commands)
        except _REDIRECTS:
            await self._remap(seen)
            return await (await self._for(first))[0].execute_many(commands)
        except (RedisConnectionError, OSError, TimeoutError):
            self._mapped = False
            raise

    async def _for(self, key: bytes) -> tuple[Connections, int]:
        """The connections to the node that serves ``key``'s slot, and the map's generation."""
        if not self._mapped:
            await self._remap(self._generation)
        node = self.cluster.nodes_manager.get_node_from_slot(key_slot(key))
        made = self._nodes.get(node.name)
        if made is None:
            made = self._nodes[node.name] = Connections(self._node(node.host, int(node.port)), self._timeout)
        return made, self._generation

    async def _remap(self, seen: int) -> None:
        """Read the map of the slots again — once for all the callers that found generation
        ``seen`` stale at one moment."""
        async with self._mapping:
            if self._mapped and self._generation != seen:
                return  # read meanwhile
            if not self._started:
                await self.cluster.initialize()  # the map, and redis-py's own state
                self._started = True
            else:
                await self.cluster.nodes_manager.initialize()
            self._generation += 1
            self._mapped = True

    # redis-py's cluster client for the rest (state.py's SCAN and PING on our keys' node)
    async def initialize(self) -> redis.asyncio.cluster.RedisCluster:
        return await self.cluster.initialize()

    def get_node_from_key(self, key: str) -> Any:
        return self.cluster.get_node_from_key(key)

    async def aclose(self) -> None:
        nodes, self._nodes = list(self._nodes.values()), {}
        for made in nodes:
            await made.aclose()
        await self.cluster.aclose()


# Commands whose first argument is a key (the engine's, and a test's usual ones); anything else
# is redis-py's cluster client's to route.
_KEYED = frozenset(
    (  # noqa: SIM905  (a list of words reads better as words)
        "GET SET DEL UNLINK INCR INCRBY DECR DECRBY EXISTS EXPIRE PEXPIRE TTL PTTL TYPE MGET "
        "HSET HGET HMGET HDEL HGETALL HINCRBY LPUSH RPUSH LRANGE LTRIM LLEN SADD SREM SMEMBERS SCARD "
        "ZADD ZREM ZRANGE ZCARD"
    ).split()
)


def _first_key(command: Sequence[Any]) -> bytes | None:
    """The first key ``command`` names (scripts declare theirs), as bytes; None when it names
    none, or is not one of :data:`_KEYED`."""
    name = command[0].upper() if isinstance(command[0], str) else bytes(command[0]).decode().upper()
    if name in ("EVALSHA", "EVAL"):
        key = command[3] if len(command) > 3 and int(command[2]) > 0 else None
    elif name in _KEYED and len(command) > 1:
        key = command[1]
    else:
        return None
    if key is None:
        return None
    return key.encode() if isinstance(key, str) else bytes(key)
