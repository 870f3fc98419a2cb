"""A lean asyncio client for Redis's wire protocol (RESP2): the one the Redis state engine speaks.

Written here rather than taken from redis-py because of what a request pays: redis-py's asyncio
client costs ~200 µs of CPU per command, and a scripted answer makes about four round trips to
the state. This one is an :class:`asyncio.Protocol` with a queue of waiting futures: a command
is encoded, written, and its future resolved by the reply parser (``hiredis.Reader`` when
installed — the ``redis`` extra —, else :class:`PyReader`, a small RESP2 parser of our own).
Replies come back in the order commands were sent, so any number of commands may be in flight
on one connection (pipelining) and :meth:`Client.pipeline` writes several in one go. Commands
sent in the same turn of the event loop — concurrent requests — leave in one write: the system
call is most of what a command costs, so at 16 requests in flight this halves the CPU or better.

Failures are of two kinds, kept apart on purpose:

* the connection — cannot connect, reset, no reply in time, a password refused: every affected
  command fails with :class:`~mockserver.state.base.StateUnavailable` (a 503 the client may
  retry), naming the URL with its password hidden. The next command reconnects by itself, after
  a short back-off that doubles up to :data:`BACKOFF_MAX` so a dead Redis is not hammered but
  one that comes back is used again within half a second;
* an error reply (``-ERR …``, ``-WRONGTYPE …``): :class:`ReplyError`, a programming error — the
  connection is fine and stays up.

A connection belongs to the event loop that opened it (a server runs its loop in a thread,
pytest-asyncio gives each test its own): the client keeps one per loop and opens a new one on a
loop it has not seen. :class:`BlockingClient` is the same protocol on a plain socket, for a
thread that must not depend on any loop (the records' heartbeat).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, cast
from urllib.parse import parse_qs, unquote, urlsplit

from mockserver.state.base import StateUnavailable
from mockserver.state.urls import hidden

try:  # the C parser (the `redis` extra); without it PyReader parses the same replies
    import hiredis
except ImportError:  # pragma: no cover - the tests force pure=True to run the fallback
    hiredis = None  # type: ignore[assignment]

__all__ = [
    "BACKOFF_MAX",
    "Address",
    "BlockingClient",
    "Client",
    "PyReader",
    "ReplyError",
    "Script",
    "encode",
]

Arg: TypeAlias = bytes | str | int | float
Reply: TypeAlias = Any  # bytes | int | None | list[Reply] | ReplyError, as the parser builds it

CONNECT_TIMEOUT = 2.0  # seconds to connect (TLS handshake, AUTH and SELECT included)
TIMEOUT = 2.0  # seconds the oldest command in flight may wait for its reply
BACKOFF_MIN = 0.05  # seconds before the first reconnect after a failed one
BACKOFF_MAX = 0.5  # the back-off doubles up to this: a Redis back is used within ~0.5 s


class ReplyError(Exception):
    """An error reply from Redis (``-ERR …``): the command was wrong, the connection is fine."""


class _Reader(Protocol):
    def feed(self, data: bytes, /) -> None: ...

    def gets(self) -> Reply: ...


class _Incomplete(Exception):
    """The buffer ends inside a reply: wait for more bytes."""


class PyReader:
    """RESP2 replies from a byte stream, in pure Python: ``feed`` bytes, ``gets`` one reply or
    False when none is complete yet (as ``hiredis.Reader`` does). Error replies are returned
    as :class:`ReplyError` instances, not raised, so one in a pipeline does not hide the rest."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._start = 0  # where the next reply begins

    def feed(self, data: bytes, /) -> None:
        self._buffer += data

    def gets(self) -> Reply:
        if self._start >= len(self._buffer):  # the usual end of a read: everything parsed
            return False
        try:
            reply, end = self._parse(self._start)
        except _Incomplete:
            return False
        if end == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        elif end > 65_536:  # drop what has been parsed, now and then rather than every reply
            del self._buffer[:end]
            self._start = 0
        else:
            self._start = end
        return reply

    def _parse(self, at: int) -> tuple[Reply, int]:
        buffer = self._buffer
        eol = buffer.find(b"\r\n", at)
        if eol < 0:
            raise _Incomplete
        kind, line, at = buffer[at], bytes(buffer[at + 1 : eol]), eol + 2
        if kind == 0x24:  # $ bulk string
            size = int(line)
            if size < 0:
                return None, at
            if len(buffer) < at + size + 2:
                raise _Incomplete
            return bytes(buffer[at : at + size]), at + size + 2
        if kind == 0x3A:  # : integer
            return int(line), at
        if kind == 0x2A:  # * array
            count = int(line)
            if count < 0:
                return None, at
            items = []
            for _ in range(count):
                item, at = self._parse(at)
                items.append(item)
            return items, at
        if kind == 0x2B:  # + simple string
            return line, at
        if kind == 0x2D:  # - error
            return ReplyError(line.decode(errors="replace")), at
        raise ValueError(f"not a RESP2 reply: {bytes(buffer[at - len(line) - 3 : eol])!r}")


def _reader(pure: bool) -> _Reader:
    if hiredis is not None and not pure:
        return hiredis.Reader(replyError=ReplyError)
    return PyReader()


def _arg(value: Arg) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int):
        return b"%d" % value
    return repr(value).encode()  # a float: repr round-trips exactly (Lua's tonumber reads it back)


def encode(args: Sequence[Arg]) -> bytes:
    """One command as RESP2 (an array of bulk strings)."""
    parts = [b"*%d\r\n" % len(args)]
    for value in args:
        data = _arg(value)
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _packer(pure: bool) -> Callable[[Sequence[Arg]], bytes]:
    if hiredis is not None and not pure:

        def pack(args: Sequence[Arg]) -> bytes:
            packed: bytes = hiredis.pack_command(tuple(args))  # type: ignore[arg-type]  # its stub: a 1-tuple
            return packed

        return pack
    return encode


@dataclass(frozen=True, slots=True)
class Address:
    """Where a ``redis://`` or ``rediss://`` URL points, and how to log in there."""

    host: str
    port: int
    db: int
    username: str | None
    password: str | None
    tls: ssl.SSLContext | None

    @classmethod
    def parse(cls, url: str) -> Address:
        """``redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]``; ``rediss://`` for TLS, where
        ``?ssl_cert_reqs=none`` accepts any certificate (a self-signed test setup) and
        ``?ssl_ca_certs=PATH`` trusts the CAs in PATH. ValueError (password hidden) if malformed."""
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss"):
            raise ValueError(f"not a redis:// or rediss:// URL: {hidden(url)}")
        try:
            port = parts.port or 6379
            path = parts.path.strip("/")
            db = int(path) if path else 0
        except ValueError:
            raise ValueError(f"bad port or database number in {hidden(url)}") from None
        options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        tls = None
        if parts.scheme == "rediss":
            try:
                tls = ssl.create_default_context(cafile=options.get("ssl_ca_certs"))
            except OSError as exc:  # ssl_ca_certs names no readable file
                raise ValueError(f"cannot read ssl_ca_certs of {hidden(url)}: {exc.strerror or exc}") from None
            if options.get("ssl_cert_reqs", "required").lower() == "none":
                tls.check_hostname = False
                tls.verify_mode = ssl.CERT_NONE
        username = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password is not None else None
        return cls(parts.hostname or "127.0.0.1", port, db, username, password, tls)

    def hello(self) -> list[tuple[Arg, ...]]:
        """What a new connection sends first: AUTH (a password alone, or an ACL user's) and SELECT."""
        commands: list[tuple[Arg, ...]] = []
        if self.password is not None:
            if self.username:
                commands.append(("AUTH", self.username, self.password))
            else:
                commands.append(("AUTH", self.password))
        if self.db:
            commands.append(("SELECT", self.db))
        return commands


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script, run by its SHA1 (EVALSHA) and sent whole only when Redis lacks it."""

    source: str
    sha: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())


# Error replies that say the connection cannot serve anyone (a password missing or refused,
# a dataset still loading after a restart, …): an outage for the caller, not its mistake.
_OUTAGES = ("NOAUTH", "WRONGPASS", "LOADING", "MASTERDOWN", "BUSY ")


def _error(where: str, reply: ReplyError) -> Exception:
    """What an error reply raises: StateUnavailable for an outage, else the ReplyError."""
    text = str(reply)
    return StateUnavailable(where, text) if text.startswith(_OUTAGES) else reply


def _noscript(reply: Reply) -> bool:
    return isinstance(reply, ReplyError) and str(reply).startswith("NOSCRIPT")


class _Waiter:
    """A command (or a pipeline of ``count``) waiting for its replies."""

    __slots__ = ("count", "deadline", "future", "replies")

    def __init__(self, future: asyncio.Future[Reply], count: int, batch: bool, deadline: float) -> None:
        self.future = future
        self.count = count
        self.replies: list[Reply] | None = [] if batch else None  # a batch's future gets a list
        self.deadline = deadline


class _Connection(asyncio.Protocol):
    """One connection on one loop: commands are written as they come, replies matched in order.

    One timer watches the oldest command in flight (not one per command: that would cost more
    than the command); when it is late the connection is dropped, failing everything in flight,
    since every later reply would be queued behind the missing one anyway."""

    def __init__(self, loop: asyncio.AbstractEventLoop, where: str, timeout: float, reader: _Reader) -> None:
        self.loop = loop
        self.where = where
        self.timeout = timeout
        self.reader = reader
        self.transport: asyncio.Transport | None = None
        self.pending: deque[_Waiter] = deque()
        self.lost: str | None = None  # why the connection is unusable, once it is
        self.timer: asyncio.TimerHandle | None = None
        self.outgoing: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses: no isinstance

    def send(self, payload: bytes, count: int = 1, batch: bool = False) -> asyncio.Future[Reply]:
        """Write ``payload`` (``count`` commands); the future gets the reply, or with ``batch``
        the list of all ``count`` replies."""
        if self.lost is not None or self.transport is None:
            raise StateUnavailable(self.where, self.lost or "not connected")
        future = self.loop.create_future()
        self.pending.append(_Waiter(future, count, batch, self.loop.time() + self.timeout))
        if self.timer is None:
            self.timer = self.loop.call_later(self.timeout, self._watch)
        # Alone in flight, it is written now. Otherwise at the end of this turn of the loop, with
        # whatever else is sent meanwhile: one write (one system call, the bulk of a command's
        # cost) for all the requests in flight.
        if self.outgoing:
            self.outgoing.append(payload)
        elif len(self.pending) == 1:
            self.transport.write(payload)
        else:
            self.outgoing = [payload]
            self.loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        outgoing, self.outgoing = self.outgoing, []
        if self.lost is None and self.transport is not None and outgoing:
            self.transport.write(b"".join(outgoing) if len(outgoing) > 1 else outgoing[0])

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        pending = self.pending
        while True:
            try:
                reply = self.reader.gets()
            except Exception as exc:  # the stream is not RESP: nothing after this can be trusted
                self.fail(f"unreadable reply: {exc}")
                return
            if reply is False:
                return
            if not pending:
                self.fail("a reply nobody asked for")
                return
            waiter = pending[0]
            if waiter.replies is not None:
                waiter.replies.append(reply)
                if len(waiter.replies) < waiter.count:
                    continue
                reply = waiter.replies
            pending.popleft()
            if not waiter.future.done():  # done: the caller was cancelled
                waiter.future.set_result(reply)

    def _watch(self) -> None:
        self.timer = None
        if not self.pending:
            return
        late = self.pending[0].deadline - self.loop.time()
        if late <= 0:
            self.fail(f"no reply within {self.timeout:g} s")
        else:
            self.timer = self.loop.call_later(late, self._watch)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(f"connection lost: {exc}" if exc else "connection closed by the server")

    def fail(self, why: str) -> None:
        """Drop the connection; every command in flight fails with StateUnavailable(why)."""
        if self.lost is None:
            self.lost = why
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()
        while self.pending:
            future = self.pending.popleft().future
            if not future.done():
                future.set_exception(StateUnavailable(self.where, self.lost))

    def close(self) -> None:
        self.fail("closed")


class Client:
    """Commands to one Redis, from any number of event loops (one connection each).

    ``pure`` forces the pure-Python parser and encoder even when hiredis is installed (tests)."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        timeout: float = TIMEOUT,
        pure: bool = False,
    ) -> None:
        self.address = Address.parse(url)
        self.where = hidden(url)
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self.pure = pure
        self._pack = _packer(pure)
        self._connections: dict[asyncio.AbstractEventLoop, _Connection] = {}
        self._opening: dict[asyncio.AbstractEventLoop, asyncio.Task[_Connection]] = {}
        self._backoff = 0.0
        self._retry_at = 0.0  # time.monotonic() before which no connection is tried
        self._why = ""  # why the last connection attempt failed

    # ---- commands ------------------------------------------------------------------------

    async def call(self, *args: Arg) -> Reply:
        """One command's reply; :class:`ReplyError` if Redis answered with an error."""
        loop = asyncio.get_running_loop()
        connection = self._connections.get(loop)
        if connection is None or connection.lost is not None:
            connection = await self._connect(loop)
        reply = await connection.send(self._pack(args))
        if isinstance(reply, ReplyError):
            raise self._error(reply)
        return reply

    async def pipeline(self, *commands: Sequence[Arg]) -> list[Reply]:
        """Several commands in one write, and their replies in order. Every command runs (they
        are not a transaction); the first error reply, if any, is raised once all have come."""
        if not commands:
            return []
        loop = asyncio.get_running_loop()
        connection = self._connections.get(loop)
        if connection is None or connection.lost is not None:
            connection = await self._connect(loop)
        pack = self._pack
        replies: list[Reply] = await connection.send(b"".join([pack(a) for a in commands]), len(commands), True)
        for reply in replies:
            if isinstance(reply, ReplyError):
                raise self._error(reply)
        return replies

    async def run(self, script: Script, keys: Sequence[Arg] = (), args: Sequence[Arg] = ()) -> Reply:
        """Run a Lua script: EVALSHA, and EVAL when Redis does not have it (a new or flushed
        server), which caches it there for the next time."""
        loop = asyncio.get_running_loop()
        connection = self._connections.get(loop)
        if connection is None or connection.lost is not None:
            connection = await self._connect(loop)
        reply = await connection.send(self._pack(("EVALSHA", script.sha, len(keys), *keys, *args)))
        if _noscript(reply):
            reply = await self.call("EVAL", script.source, len(keys), *keys, *args)
        elif isinstance(reply, ReplyError):
            raise self._error(reply)
        return reply

    def _error(self, reply: ReplyError) -> Exception:
        return _error(self.where, reply)

    # ---- connections ---------------------------------------------------------------------

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        """This loop's connection, opened once however many commands wait for it."""
        opening = self._opening.get(loop)
        if opening is None:
            if time.monotonic() < self._retry_at:  # failed a moment ago: fail fast, try again soon
                raise StateUnavailable(self.where, self._why)
            opening = self._opening[loop] = loop.create_task(self._open(loop))
            opening.add_done_callback(self._opened)
        # Shielded: one waiter cancelled must not cancel the others' connection.
        return await asyncio.shield(opening)

    def _opened(self, task: asyncio.Task[_Connection]) -> None:
        for loop, opening in list(self._opening.items()):
            if opening is task:
                del self._opening[loop]
        if not task.cancelled():
            task.exception()  # retrieved here, so a failure nobody awaited is not logged as lost

    async def _open(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        address = self.address
        connection = _Connection(loop, self.where, self.timeout, _reader(self.pure))
        try:
            async with asyncio.timeout(self.connect_timeout):
                await loop.create_connection(
                    lambda: connection,
                    address.host,
                    address.port,
                    ssl=address.tls,
                    server_hostname=address.host if address.tls is not None else None,
                )
                replies = await self._hello(connection)
        except TimeoutError:
            connection.close()
            raise self._failed(f"could not connect within {self.connect_timeout:g} s") from None
        except StateUnavailable:  # lost, or no reply in time, while logging in
            why = connection.lost or "connection lost"
            connection.close()
            raise self._failed(why) from None
        except OSError as exc:  # refused, unreachable, TLS failures (ssl.SSLError is an OSError)
            connection.close()
            raise self._failed(f"could not connect: {exc.strerror or exc}") from None
        for reply in replies:
            if isinstance(reply, ReplyError):  # a password refused, no such database
                connection.close()
                raise self._failed(str(reply))
        self._backoff = 0.0
        self._retry_at = 0.0
        old = self._connections.get(loop)
        if old is not None:
            old.close()
        self._forget_dead_loops()
        self._connections[loop] = connection
        return connection

    async def _hello(self, connection: _Connection) -> list[Reply]:
        hello = self.address.hello()
        if not hello:
            return []
        replies: list[Reply] = await connection.send(b"".join(self._pack(args) for args in hello), len(hello), True)
        return replies

    def _failed(self, why: str) -> StateUnavailable:
        """Note a failed attempt (the back-off grows) and the error to raise for it."""
        self._backoff = min(BACKOFF_MAX, max(BACKOFF_MIN, self._backoff * 2))
        self._retry_at = time.monotonic() + self._backoff
        self._why = why
        return StateUnavailable(self.where, why)

    def _forget_dead_loops(self) -> None:
        """Let go of connections whose loop is closed (a finished test's): nothing can use them."""
        for loop in list(self._connections):  # list(): a copy made at once, whatever other threads do
            if loop.is_closed():
                self._connections.pop(loop, None)

    async def release(self) -> None:
        """Close this loop's connection (a loop about to end: a test's, a thread's)."""
        connection = self._connections.pop(asyncio.get_running_loop(), None)
        if connection is not None:
            connection.close()

    async def close(self) -> None:
        """Close every connection: this loop's now, another running loop's from that loop."""
        here = asyncio.get_running_loop()
        for loop, connection in list(self._connections.items()):
            if loop is here:
                connection.close()
            elif not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # closed meanwhile
                    loop.call_soon_threadsafe(connection.close)
        self._connections.clear()


class BlockingClient:
    """The same protocol on a plain blocking socket, for a thread that must not depend on an
    event loop. Connects on first use and after any failure; failures raise StateUnavailable."""

    def __init__(self, url: str, *, timeout: float = TIMEOUT, pure: bool = False) -> None:
        self.address = Address.parse(url)
        self.where = hidden(url)
        self.timeout = timeout
        self.pure = pure
        self._pack = _packer(pure)
        self._socket: socket.socket | None = None
        self._reader: _Reader = _reader(pure)

    def call(self, *args: Arg) -> Reply:
        reply = self.pipeline(args)[0]
        return reply

    def pipeline(self, *commands: Sequence[Arg]) -> list[Reply]:
        """Send ``commands`` in one write and read their replies; the first error reply is raised."""
        try:
            sock = self._socket if self._socket is not None else self._open()
            sock.sendall(b"".join(self._pack(args) for args in commands))
            replies = [self._read(sock) for _ in commands]
        except OSError as exc:  # socket.timeout and ssl.SSLError are OSErrors too
            self.close()
            raise StateUnavailable(self.where, str(exc) or type(exc).__name__) from None
        for reply in replies:
            if isinstance(reply, ReplyError):
                raise _error(self.where, reply)
        return replies

    def _read(self, sock: socket.socket) -> Reply:
        while (reply := self._reader.gets()) is False:
            data = sock.recv(65_536)
            if not data:
                raise ConnectionResetError("connection closed by the server")
            self._reader.feed(data)
        return reply

    def _open(self) -> socket.socket:
        address = self.address
        sock = socket.create_connection((address.host, address.port), timeout=self.timeout)
        if address.tls is not None:
            sock = address.tls.wrap_socket(sock, server_hostname=address.host)
        self._socket, self._reader = sock, _reader(self.pure)
        hello = address.hello()
        if hello:
            sock.sendall(b"".join(self._pack(args) for args in hello))
            for _ in hello:
                reply = self._read(sock)
                if isinstance(reply, ReplyError):
                    self.close()
                    raise OSError(str(reply))
        return sock

    def close(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.close()
            self._socket = None
