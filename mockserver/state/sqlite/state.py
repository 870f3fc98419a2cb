"""``--state sqlite:PATH``: the state in one SQLite file every server process on the host shares.

Four tables of its own (``state_values``, ``state_maps``, ``state_lists``, ``state_buckets``),
created if missing, so the file may be the one :class:`~mockserver.state.sqlite.records.SqliteStore`
keeps the records in. WAL mode as there: readers never wait for the writer, and a commit is an
append to the log (``synchronous=NORMAL``: no fsync per commit, nothing committed is lost when a
process dies). Every read-modify-write (``exchange`` with reads or several counts, ``push`` and
its trim, ``draw``, ``forget``) is one ``BEGIN IMMEDIATE`` transaction: the write lock is taken
before anything is read, so two processes can neither count the same value nor both spend a
bucket's last token. A count alone (``add``) is one upsert, atomic by itself for the same reason.

Where the statements run is the cost that matters: a scripted answer makes three or four state
calls per request, each a few tens of µs of SQLite (most of it the eight system calls of a
commit), while a hop to a worker thread and back (what ``SqliteStore`` does) costs 50–250 µs more
per call on a busy machine. So a call runs **on the caller's thread** (the event loop) on a
connection whose busy timeout is zero: it either completes at once or fails with ``SQLITE_BUSY``
before changing anything, because another process holds the write lock (or a checkpoint does).
Only then is the same call run again on this state's one worker thread, on a second connection
that waits for the lock in short sleeps (0.1 ms doubling to 5 ms, rather than SQLite's own
handler, whose first sleep is a whole millisecond) — up to ``timeout`` seconds, after which the
file counts as unavailable. The event loop never sleeps on a lock; the uncontended call pays no
thread hop.

The loop's connection never checkpoints the log itself (a checkpoint writes pages back to the
database and fsyncs it: 10–25 ms stalls measured on this disk). Every :data:`CHECKPOINT_EVERY`
commits it asks the worker thread for one instead (see :meth:`SqliteState._checkpointing`).
Values put with a ``ttl`` carry an expiry in real time (``time.time()``, so every process agrees
on it); expired rows read as absent and are swept now and then. Lists are trimmed in batches:
which rows are a list is decided by its newest row's cap, so a read never sees more than the cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from mockserver.state.base import Draw, Drawn, StateUnavailable, charge
from mockserver.state.records import Store
from mockserver.state.sqlite.connection import connect, transaction

__all__ = ["BUSY_TIMEOUT", "CHECKPOINT_EVERY", "SqliteState"]

log = logging.getLogger("mockserver")

BUSY_TIMEOUT = 5.0  # seconds a call waits (on the worker thread) for another process's write lock
CHECKPOINT_EVERY = 256  # commits on the loop's connection between two passive checkpoints
_RESTART_TRIES = 20  # tries at a checkpoint that restarts the log (each waits for no lock)
_SWEEP_EVERY = 256  # puts with a ttl between two sweeps of the expired values

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS state_values (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL,  -- bytes as put, an INTEGER once counted (BLOB affinity converts neither)
    expires REAL  -- time.time() it is gone; NULL: kept
);
CREATE INDEX IF NOT EXISTS state_values_expiring ON state_values (expires) WHERE expires IS NOT NULL;
CREATE TABLE IF NOT EXISTS state_maps (
    key TEXT NOT NULL,
    field TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (key, field)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state_lists (
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,  -- consecutive per key, oldest lowest
    cap INTEGER NOT NULL,  -- the cap it was pushed with: the newest row's says which rows are the list
    value BLOB NOT NULL,
    PRIMARY KEY (key, seq)
);
CREATE TABLE IF NOT EXISTS state_buckets (
    key TEXT PRIMARY KEY,
    level REAL NOT NULL,
    at REAL NOT NULL
) WITHOUT ROWID;
"""
_TABLES = ("state_values", "state_maps", "state_lists", "state_buckets")

# Add to a counter in one statement. A key that is absent or expired starts again from ``by``
# (its expiry dropped, as in memory); a live one keeps its expiry. A value put as bytes does not
# match the WHERE (no row is returned) and is converted in Python instead, as memory does, so
# ``b"12"`` counts on from 12 and ``b"abc"`` raises rather than silently counting from 0.
_COUNT = """
INSERT INTO state_values (key, value, expires) VALUES (?1, ?2, NULL)
ON CONFLICT (key) DO UPDATE SET
    value = CASE WHEN expires <= ?3 THEN ?2 ELSE value + ?2 END,
    expires = CASE WHEN expires <= ?3 THEN NULL ELSE expires END
WHERE typeof(value) = 'integer' OR expires <= ?3
RETURNING value
"""

# A list is the rows of its key above the newest row's ``seq - cap``. The rows below are
# deleted only every _TRIM_EVERY pushes: deleting the oldest row on every push rewrites one
# more page per commit (measured ~25 µs of a ~70 µs push).
_NEWEST = "SELECT seq, cap FROM state_lists WHERE key = ? ORDER BY seq DESC LIMIT 1"
_ITEMS = """
SELECT value FROM state_lists
WHERE key = ?1 AND seq > (SELECT seq - cap FROM state_lists WHERE key = ?1 ORDER BY seq DESC LIMIT 1)
ORDER BY seq
"""
# The same list's newest ?2 items, oldest first.
_NEWEST_ITEMS = """
SELECT value FROM (
    SELECT value, seq FROM state_lists
    WHERE key = ?1 AND seq > (SELECT seq - cap FROM state_lists WHERE key = ?1 ORDER BY seq DESC LIMIT 1)
    ORDER BY seq DESC LIMIT ?2
) ORDER BY seq
"""
_TRIM_EVERY = 32


class _Busy(Exception):
    """The call met another connection's lock and changed nothing: run it again elsewhere."""


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # not from the library itself (no code): judge by the message
        return "locked" in str(exc) or "busy" in str(exc)
    return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _after(prefix: str) -> str | None:
    """The least string greater than every string starting with ``prefix`` (None: no bound).

    SQLite compares TEXT byte by byte in UTF-8, which orders as code points do, so
    ``prefix <= key < _after(prefix)`` is exactly ``key.startswith(prefix)`` — with every
    character literal (no LIKE or GLOB wildcards to escape) and the primary key's index used.
    """
    stripped = prefix.rstrip(chr(0x10FFFF))
    if not stripped:
        return None
    point = ord(stripped[-1]) + 1
    if 0xD800 <= point <= 0xDFFF:  # surrogates are not text SQLite can hold: skip them
        point = 0xE000
    return stripped[:-1] + chr(point)


def _number(value: int | bytes) -> int:
    return value if isinstance(value, int) else int(value)


def _decimal(value: int | bytes | None) -> bytes | None:
    return str(value).encode() if isinstance(value, int) else value


class SqliteState:
    """One SQLite file's state (see the module's docstring for where each call runs and why)."""

    shared = True

    def __init__(self, path: str, records: Store, *, timeout: float = BUSY_TIMEOUT) -> None:
        self.url = "sqlite:" + path
        self.records = records
        self._path = path
        self._timeout = timeout
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="mockserver-state")
        self._slow: sqlite3.Connection | None = None  # the worker thread's: waits for locks
        self._fast: sqlite3.Connection | None = None  # the caller's: never waits
        # The fast connection is one transaction at a time: a second thread (a test's Python
        # API) finding it taken goes to the worker thread rather than waiting.
        self._fast_lock = threading.Lock()
        self._commits = 0
        self._checkpoint: Future[None] | None = None
        self._ttl_puts = 0
        self._closed = False

    # ---- running a call -----------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        db = connect(self._path, 0.0, any_thread=True)
        try:
            # Through _waiting: another process may be creating the file or switching it to WAL
            # at this very moment (two servers started together), and that holds a lock.
            self._waiting(db, lambda db: db.execute("PRAGMA synchronous=NORMAL"))
        except BaseException:
            db.close()
            raise
        return db

    def _open(self) -> sqlite3.Connection:
        """The worker thread's connection, the schema and the fast connection (on the worker
        thread, so creating the file and its tables never blocks the event loop)."""
        if self._slow is None:
            db = self._connect()
            try:
                self._waiting(db, lambda db: db.execute("PRAGMA journal_mode=WAL").fetchall())
                self._waiting(db, lambda db: db.executescript(_SCHEMA))
                fast = self._connect()
                # checkpoints run on the worker thread
                self._waiting(fast, lambda db: db.execute("PRAGMA wal_autocheckpoint=0"))
            except BaseException:
                db.close()
                raise
            self._slow, self._fast = db, fast
        return self._slow

    def _call(self, db: sqlite3.Connection, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn`` on ``db``; on any failure its transaction is rolled back, and a lock it met
        becomes :class:`_Busy` (nothing was changed), any other SQLite error StateUnavailable."""
        try:
            return fn(db)
        except BaseException as exc:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
                raise _Busy from exc
            if isinstance(exc, sqlite3.Error) and not isinstance(exc, sqlite3.ProgrammingError):
                raise StateUnavailable(self.url, str(exc)) from exc
            raise

    def _waiting(self, db: sqlite3.Connection, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn`` on the worker thread: on a lock, again after a short sleep (growing from
        0.1 to 5 ms, so a lock held for microseconds costs little more than that) until
        ``timeout`` seconds have passed."""
        deadline = time.monotonic() + self._timeout
        pause = 0.0001
        while True:
            try:
                return self._call(db, fn)
            except _Busy:
                if time.monotonic() >= deadline:
                    raise StateUnavailable(
                        self.url, f"locked by another connection for more than {self._timeout:g} s"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.005)

    def _slowly(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._closed:
            raise StateUnavailable(self.url, "closed")
        try:
            db = self._open()
        except sqlite3.Error as exc:  # no folder, not writable, not a database…
            raise StateUnavailable(self.url, str(exc)) from exc
        return self._waiting(db, fn)

    async def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn`` on the fast connection if it completes at once, else on the worker thread."""
        db = self._fast
        if db is not None and self._fast_lock.acquire(blocking=False):
            try:
                before = db.total_changes
                result = self._call(db, fn)
            except _Busy:
                pass
            else:
                if db.total_changes != before:
                    self._committed()
                return result
            finally:
                self._fast_lock.release()
        if self._closed:
            raise StateUnavailable(self.url, "closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._slowly, fn)

    def _committed(self) -> None:
        self._commits += 1
        if self._commits < CHECKPOINT_EVERY or (self._checkpoint is not None and not self._checkpoint.done()):
            return
        self._commits = 0
        self._checkpoint = self._thread.submit(self._checkpointing)

    def _checkpointing(self) -> None:
        db = self._slow
        if db is None or self._closed:
            return
        try:
            # PASSIVE copies the log back without blocking anyone; but while the loop keeps
            # committing, the log is never found fully copied and would only grow. RESTART then
            # copies the little that is left holding the write lock — so the next writer starts
            # the log over — and it does not wait for that lock (busy timeout 0): the loop's
            # calls meanwhile meet the lock and queue on this thread behind it.
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            pause = 0.0001
            for _ in range(_RESTART_TRIES):  # the lock is free more often than not: a few tries do
                ((busy, _, _),) = db.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
                if not busy or self._closed:
                    return
                time.sleep(pause)
                pause = min(pause * 2, 0.002)
        except sqlite3.Error as exc:
            log.debug("the state's checkpoint was skipped (the next one catches up): %s", exc)

    # ---- values and counters ------------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        now = time.time()

        def select(db: sqlite3.Connection) -> bytes | None:
            row = db.execute(
                "SELECT value FROM state_values WHERE key = ? AND (expires IS NULL OR expires > ?)", (key, now)
            ).fetchone()
            return None if row is None else _decimal(row[0])

        return await self._run(select)

    async def put(self, key: str, value: bytes, ttl: float | None = None) -> None:
        now = time.time()
        expires = None if ttl is None else now + ttl
        sweep = False
        if ttl is not None:
            self._ttl_puts += 1
            sweep = self._ttl_puts % _SWEEP_EVERY == 0

        def write(db: sqlite3.Connection) -> None:
            db.execute(  # an upsert updates the row in place (REPLACE would delete and reinsert it)
                "INSERT INTO state_values (key, value, expires) VALUES (?1, ?2, ?3) "
                "ON CONFLICT (key) DO UPDATE SET value = ?2, expires = ?3",
                (key, bytes(value), expires),
            )
            if sweep:  # expired values nobody reads again would stay otherwise
                db.execute("DELETE FROM state_values WHERE expires <= ?", (now,))

        await self._run(write)

    async def delete(self, key: str) -> bool:
        now = time.time()

        def remove(db: sqlite3.Connection) -> bool:
            gone = db.execute("DELETE FROM state_values WHERE key = ? RETURNING expires", (key,)).fetchall()
            return bool(gone) and (gone[0][0] is None or gone[0][0] > now)

        return await self._run(remove)

    @staticmethod
    def _count(db: sqlite3.Connection, key: str, by: int, now: float) -> int:
        row = db.execute(_COUNT, (key, by, now)).fetchall()
        if row:
            return int(row[0][0])
        # The value was put as bytes: read as a number the way memory reads it.
        (value,) = db.execute("SELECT value FROM state_values WHERE key = ?", (key,)).fetchone()
        number = _number(value) + by
        db.execute("UPDATE state_values SET value = ? WHERE key = ?", (number, key))
        return number

    def _count_alone(self, key: str, by: int, now: float) -> Callable[[sqlite3.Connection], int]:
        def count(db: sqlite3.Connection) -> int:
            # One statement is atomic by itself (it takes the write lock before it reads): no
            # BEGIN / COMMIT to pay, unless the value is bytes and Python must read it.
            row = db.execute(_COUNT, (key, by, now)).fetchall()
            if row:
                return int(row[0][0])
            with transaction(db, rollback=False):
                return self._count(db, key, by, now)

        return count

    async def add(self, key: str, by: int = 1) -> int:
        return await self._run(self._count_alone(key, by, time.time()))

    async def exchange(
        self, read: Sequence[str] = (), count: Sequence[str] = ()
    ) -> tuple[list[bytes | None], list[int]]:
        now = time.time()
        wanted = list(read)
        # One SELECT for every key read: one snapshot, one statement (cached per key count).
        select = (
            "SELECT key, value FROM state_values WHERE key IN ("
            + ", ".join("?" * len(set(wanted)))
            + ") AND (expires IS NULL OR expires > ?)"
        )

        def values(db: sqlite3.Connection) -> list[bytes | None]:
            if not wanted:
                return []
            found = dict(db.execute(select, (*dict.fromkeys(wanted), now)).fetchall())
            return [_decimal(found.get(key)) for key in wanted]

        if not wanted and len(count) == 1:  # one count alone: what add does
            return [], [await self._run(self._count_alone(count[0], 1, now))]

        def both(db: sqlite3.Connection) -> tuple[list[bytes | None], list[int]]:
            if not count:
                return values(db), []
            with transaction(db, rollback=False):  # the reads see the state the counts start from
                return values(db), [self._count(db, key, 1, now) for key in count]

        return await self._run(both)

    # ---- maps ---------------------------------------------------------------------------

    async def map_put(self, key: str, field: str, value: bytes) -> None:
        await self._run(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO state_maps (key, field, value) VALUES (?, ?, ?)", (key, field, bytes(value))
            )
        )

    async def map_delete(self, key: str, field: str) -> bool:
        def remove(db: sqlite3.Connection) -> bool:
            return db.execute("DELETE FROM state_maps WHERE key = ? AND field = ?", (key, field)).rowcount > 0

        return await self._run(remove)

    async def map_all(self, key: str) -> dict[str, bytes]:
        def select(db: sqlite3.Connection) -> dict[str, bytes]:
            return dict(db.execute("SELECT field, value FROM state_maps WHERE key = ?", (key,)).fetchall())

        return await self._run(select)

    # ---- lists --------------------------------------------------------------------------

    async def push(self, key: str, value: bytes, cap: int) -> None:
        if cap < 0:
            raise ValueError("cap must be >= 0")

        def append(db: sqlite3.Connection) -> None:
            with transaction(db, rollback=False):
                newest = db.execute(_NEWEST, (key,)).fetchone()
                last, was = newest if newest is not None else (0, 0)
                if cap > was + 1:
                    # A larger cap than the list's would bring back rows it has dropped but not
                    # yet deleted: delete them first.
                    db.execute("DELETE FROM state_lists WHERE key = ? AND seq <= ?", (key, last - was))
                seq = last + 1
                db.execute(
                    "INSERT INTO state_lists (key, seq, cap, value) VALUES (?, ?, ?, ?)", (key, seq, cap, bytes(value))
                )
                if seq % _TRIM_EVERY == 0:
                    db.execute("DELETE FROM state_lists WHERE key = ? AND seq <= ?", (key, seq - cap))

        await self._run(append)

    async def items(self, key: str, newest: int | None = None) -> list[bytes]:
        def select(db: sqlite3.Connection) -> list[bytes]:
            if newest is not None:
                return [value for (value,) in db.execute(_NEWEST_ITEMS, (key, max(0, newest)))]
            return [value for (value,) in db.execute(_ITEMS, (key,))]

        return await self._run(select)

    # ---- token buckets ------------------------------------------------------------------

    async def draw(self, draws: Sequence[Draw], now: float) -> Drawn:
        keys = list(dict.fromkeys(d.key for d in draws))
        select = "SELECT key, level, at FROM state_buckets WHERE key IN (" + ", ".join("?" * len(keys)) + ")"

        def pay(db: sqlite3.Connection) -> Drawn:
            with transaction(db, rollback=False):
                seen = {key: (level, at) for key, level, at in db.execute(select, keys)} if keys else {}
                drawn = charge(draws, seen, now)  # memory's very arithmetic: every engine decides alike
                db.executemany(
                    "INSERT OR REPLACE INTO state_buckets (key, level, at) VALUES (?, ?, ?)",
                    [(d.key, level, now) for d, level in zip(draws, drawn.levels, strict=True)],
                )
            return drawn

        return await self._run(pay)

    # ---- the rest -----------------------------------------------------------------------

    async def forget(self, prefix: str) -> None:
        upper = _after(prefix)
        where, args = ("key >= ?", (prefix,)) if upper is None else ("key >= ? AND key < ?", (prefix, upper))

        def remove(db: sqlite3.Connection) -> None:
            with transaction(db, rollback=False):  # one transaction: other processes see all of it gone or none
                for table in _TABLES:
                    db.execute(f"DELETE FROM {table} WHERE {where}", args)

        await self._run(remove)

    async def ping(self) -> None:
        await self._run(lambda db: db.execute("SELECT 1 FROM state_values LIMIT 1").fetchall())

    async def close(self) -> None:
        """Close both connections (the records stay open: the Responses lifecycle closes them)."""
        if self._closed:
            return
        self._closed = True

        def shut() -> None:
            if self._slow is not None:
                self._slow.close()
                self._slow = None

        with self._fast_lock:
            if self._fast is not None:
                self._fast.close()
                self._fast = None
        await asyncio.get_running_loop().run_in_executor(self._thread, shut)
        self._thread.shutdown(wait=False)
