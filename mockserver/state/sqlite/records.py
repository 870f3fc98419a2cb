"""The SQLite store (``--store sqlite:PATH``): responses shared by every server process
that opens the same file.

The stdlib ``sqlite3`` in WAL mode (readers never wait for the writer), run off the event
loop on one private thread that owns the connection. The conditional update is one
``BEGIN IMMEDIATE`` transaction (the write lock taken before the status is read), so a
cancel from one process and a run's last write from another cannot both win.

Stored chat completions share the ``responses`` table (``kind`` tells them apart); ``seq``
is the creation order that listing pages through. Files written before those two columns
existed are migrated in place when opened (see :func:`_migrate`).

Each open store is an owner (:mod:`mockserver.state.owners`): a row of the ``owners``
table (token, pid, place, process start, heartbeat — renewed every ``heartbeat`` seconds by a
thread of its own), and the ``owner`` column of every record it creates. :meth:`SqliteStore.orphans`
finds the records left ``queued`` / ``in_progress`` by an owner that is gone, for the lifecycle
to fail; a record whose owner is alive — in this process or another — is never one of them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from mockserver.clock import Clock
from mockserver.state.owners import LIVE, Owner, alive, place, process_start
from mockserver.state.records import Page, Query, Record, RecordKind
from mockserver.state.sqlite.connection import connect, transaction
from mockserver.wire.json import Json

__all__ = ["HEARTBEAT", "LEASE", "SqliteStore"]

log = logging.getLogger("mockserver")

HEARTBEAT = 5.0  # seconds between an owner's heartbeats
LEASE = 30.0  # seconds without a heartbeat after which an owner elsewhere (another host) is gone

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    response TEXT NOT NULL,
    input_items TEXT NOT NULL,
    messages TEXT NOT NULL,
    background INTEGER NOT NULL,
    stream INTEGER NOT NULL,
    events INTEGER NOT NULL,
    expires REAL NOT NULL,
    kind TEXT NOT NULL DEFAULT 'response',
    seq INTEGER,
    owner TEXT
);
CREATE TABLE IF NOT EXISTS events (
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS owners (
    token TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    place TEXT NOT NULL,
    started TEXT,
    heartbeat REAL NOT NULL
);
"""


# What a Record is read from (see _record).
_COLUMNS = "id, response, input_items, messages, background, stream, events, kind"
_RUNNING = "status IN ('queued', 'in_progress')"


def _dumps(obj: Any) -> str:
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate a request echoes ("\ud800"): SQLite stores UTF-8
        return json.dumps(obj, separators=(",", ":"))
    return text


def _record(row: tuple[Any, ...]) -> Record:
    messages = tuple((role, text) for role, text in json.loads(row[3]))
    items = tuple(json.loads(row[2]))
    return Record(row[0], json.loads(row[1]), items, messages, bool(row[4]), bool(row[5]), row[6], row[7])


def _migrate(db: sqlite3.Connection) -> None:
    """Bring an older file up to date: add ``kind`` (its rows are all responses), ``seq``
    (their rowids are their insertion order) and ``owner`` (unknown: NULL, which
    :meth:`SqliteStore.orphans` counts as gone). In one write transaction, so two servers
    opening the same old file cannot both add a column."""
    with transaction(db):
        columns = {row[1] for row in db.execute("PRAGMA table_info(responses)")}
        if "kind" not in columns:
            db.execute("ALTER TABLE responses ADD COLUMN kind TEXT NOT NULL DEFAULT 'response'")
        if "seq" not in columns:
            db.execute("ALTER TABLE responses ADD COLUMN seq INTEGER")
            db.execute("UPDATE responses SET seq = rowid")
        if "owner" not in columns:
            db.execute("ALTER TABLE responses ADD COLUMN owner TEXT")
        db.execute("CREATE INDEX IF NOT EXISTS responses_by_kind ON responses (kind, seq)")
        db.execute(f"CREATE INDEX IF NOT EXISTS responses_running ON responses (status) WHERE {_RUNNING}")


class SqliteStore:
    shared = True  # other processes may run the responses it holds (the lifecycle looks for orphans)

    def __init__(
        self,
        path: str,
        clock: Clock,
        ttl: float = 2_592_000.0,
        *,
        heartbeat: float = HEARTBEAT,
        lease: float = LEASE,
    ) -> None:
        self._path = path
        self._clock = clock
        self._ttl = ttl
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="mockserver-store")
        self._db: sqlite3.Connection | None = None
        self.token = uuid.uuid4().hex  # this store's owner token
        self._heartbeat = heartbeat
        self._lease = lease
        self._stop = threading.Event()
        self._beats: threading.Thread | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:  # opened on the store's own thread, used only there
            db = connect(self._path, 10.0)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            _migrate(db)
            self._register(db)
            self._db = db
            self._beats = threading.Thread(target=self._beat, name="mockserver-store-heartbeat", daemon=True)
            self._beats.start()
        return self._db

    # ---- the owner ----------------------------------------------------------------------

    def _register(self, db: sqlite3.Connection) -> None:
        """This store's owner row, (re)written with a fresh heartbeat."""
        LIVE.add(self.token)
        db.execute(
            "INSERT OR REPLACE INTO owners (token, pid, place, started, heartbeat) VALUES (?, ?, ?, ?, ?)",
            (self.token, os.getpid(), place(), process_start(), time.time()),
        )

    def _beat(self) -> None:
        """The heartbeat thread: renew the lease until the store closes (its own connection, so
        a busy store thread or event loop never delays it)."""
        db: sqlite3.Connection | None = None
        try:
            while not self._stop.wait(self._heartbeat):
                try:
                    if db is None:
                        db = connect(self._path, 10.0)
                    beat = db.execute("UPDATE owners SET heartbeat = ? WHERE token = ?", (time.time(), self.token))
                    if beat.rowcount == 0:  # taken for gone (a lease judged from afar): here again
                        self._register(db)
                except sqlite3.Error as exc:
                    log.warning("the response store's heartbeat failed (it tries again): %s", exc)
        finally:
            if db is not None:
                db.close()

    async def orphans(self, ids: Sequence[str] | None = None) -> list[Record]:
        """Responses ``queued`` or ``in_progress`` whose owner is gone (of ``ids``, or all),
        oldest first. A record from before owners were kept (no owner) counts as orphaned. A
        full look (no ``ids``) also forgets the owner rows of processes that are gone."""
        now, wall = self._clock.now(), time.time()
        where = [_RUNNING, "kind = 'response'", "expires > ?"]
        args: list[object] = [now]
        if ids is not None:
            if not ids:
                return []
            where.append(f"id IN ({', '.join('?' for _ in ids)})")
            args += list(ids)
        judged: dict[str, bool] = {}

        def live(row: Sequence[Any]) -> bool:
            """Is the owner in ``row`` (token, pid, place, started, heartbeat) running?"""
            token = row[0]
            if token is None or row[1] is None:  # no owner kept, or its row is gone: so is it
                return False
            if token not in judged:
                owner = Owner(token, row[1], row[2], row[3], row[4])
                judged[token] = token == self.token or alive(owner, wall, self._lease)
            return judged[token]

        def select(db: sqlite3.Connection) -> list[Record]:
            rows = db.execute(
                f"SELECT {_COLUMNS}, owner, pid, place, started, heartbeat FROM responses "
                f"LEFT JOIN owners ON owners.token = responses.owner WHERE {' AND '.join(where)} ORDER BY seq",
                args,
            ).fetchall()
            found = [_record(row[:8]) for row in rows if not live(row[8:])]
            if ids is None:
                owners = db.execute("SELECT token, pid, place, started, heartbeat FROM owners").fetchall()
                gone = [row[0] for row in owners if not live(row)]
                if gone:
                    db.execute(f"DELETE FROM owners WHERE token IN ({', '.join('?' for _ in gone)})", gone)
            return found

        return await self._run(select)

    async def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, lambda: fn(self._conn()))

    async def create(self, record: Record) -> bool:
        now = self._clock.now()
        row = (
            record.id,
            record.status,
            _dumps(record.response),
            _dumps(record.input_items),
            _dumps(record.messages),
            int(record.background),
            int(record.stream),
            now + self._ttl,
            record.kind,
            self.token,
        )

        def insert(db: sqlite3.Connection) -> bool:
            with transaction(db):
                db.execute(
                    "DELETE FROM events WHERE id IN (SELECT id FROM responses WHERE id = ? AND expires <= ?)",
                    (record.id, now),
                )
                db.execute("DELETE FROM responses WHERE id = ? AND expires <= ?", (record.id, now))
                try:  # the write lock is held, so MAX(seq) + 1 is this process's alone
                    db.execute(
                        "INSERT INTO responses (id, status, response, input_items, messages, background, stream, "
                        "events, expires, kind, owner, seq) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, "
                        "(SELECT COALESCE(MAX(seq), 0) + 1 FROM responses))",
                        row,
                    )
                except sqlite3.IntegrityError:
                    return False
            return True

        return await self._run(insert)

    async def get(self, response_id: str, kind: RecordKind = "response") -> Record | None:
        now = self._clock.now()

        def select(db: sqlite3.Connection) -> Record | None:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM responses WHERE id = ? AND kind = ? AND expires > ?",
                (response_id, kind, now),
            ).fetchone()
            return None if row is None else _record(row)

        return await self._run(select)

    async def update(self, response_id: str, response: Json, events: Sequence[Json], expect: frozenset[str]) -> bool:
        body, status = _dumps(response), str(response["status"])
        rows = [(response_id, e["sequence_number"], _dumps(e)) for e in events]

        def write(db: sqlite3.Connection) -> bool:
            with transaction(db):
                row = db.execute(
                    "SELECT status FROM responses WHERE id = ? AND kind = 'response'", (response_id,)
                ).fetchone()
                if row is None or row[0] not in expect:
                    return False
                db.executemany("INSERT OR REPLACE INTO events VALUES (?, ?, ?)", rows)
                db.execute(
                    "UPDATE responses SET status = ?, response = ?, events = events + ? WHERE id = ?",
                    (status, body, len(rows), response_id),
                )
            return True

        return await self._run(write)

    async def events(self, response_id: str, after: int) -> list[Json]:
        def select(db: sqlite3.Connection) -> list[Json]:
            found = db.execute("SELECT body FROM events WHERE id = ? AND seq > ? ORDER BY seq", (response_id, after))
            return [json.loads(body) for (body,) in found]

        return await self._run(select)

    async def delete(self, response_id: str, kind: RecordKind = "response") -> bool:
        def remove(db: sqlite3.Connection) -> bool:
            with transaction(db):
                gone = db.execute("DELETE FROM responses WHERE id = ? AND kind = ?", (response_id, kind)).rowcount
                if gone:
                    db.execute("DELETE FROM events WHERE id = ?", (response_id,))
                return gone > 0

        return await self._run(remove)

    async def clear(self) -> None:
        def remove(db: sqlite3.Connection) -> None:
            with transaction(db):  # one transaction: other processes see all of it or none
                db.execute("DELETE FROM responses")
                db.execute("DELETE FROM events")

        await self._run(remove)

    async def rewrite(self, record_id: str, obj: Json, kind: RecordKind) -> bool:
        now, body = self._clock.now(), _dumps(obj)

        def write(db: sqlite3.Connection) -> bool:
            changed = db.execute(
                "UPDATE responses SET response = ? WHERE id = ? AND kind = ? AND expires > ?",
                (body, record_id, kind, now),
            )
            return changed.rowcount > 0

        return await self._run(write)

    async def find(self, query: Query) -> Page | None:
        now = self._clock.now()
        where: list[str] = ["kind = ?", "expires > ?"]
        args: list[str | float] = [query.kind, now]
        if query.model is not None:
            where.append("json_extract(response, '$.model') = ?")
            args.append(query.model)
        for key, value in query.metadata:
            # json_each, not a JSON path: a key may hold any character a path would need quoted.
            where.append(
                "EXISTS (SELECT 1 FROM json_each(response, '$.metadata') WHERE key = ? AND type = 'text' AND value = ?)"
            )
            args += [key, value]
        beyond, direction = (">", "ASC") if query.order == "asc" else ("<", "DESC")

        def select(db: sqlite3.Connection) -> Page | None:
            conditions, values = list(where), list(args)
            if query.after is not None:
                found = db.execute(
                    "SELECT seq FROM responses WHERE id = ? AND kind = ? AND expires > ?",
                    (query.after, query.kind, now),
                ).fetchone()
                if found is None:
                    return None
                conditions.append(f"seq {beyond} ?")
                values.append(found[0])
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM responses WHERE {' AND '.join(conditions)} ORDER BY seq {direction} LIMIT ?",
                (*values, query.limit + 1),
            )
            return Page.of(map(_record, rows), query.limit)

        return await self._run(select)

    async def close(self) -> None:
        """Close the file. This store's owner row goes: whatever it left running is an orphan
        from now on, for any other process to fail."""

        def shut(db: sqlite3.Connection) -> None:
            try:
                db.execute("DELETE FROM owners WHERE token = ?", (self.token,))
            except sqlite3.Error as exc:
                log.warning("the response store could not forget its owner row: %s", exc)
            db.close()

        self._stop.set()
        LIVE.discard(self.token)
        if self._db is not None:
            await self._run(shut)
            self._db = None
        if self._beats is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._beats.join, 5.0)
            self._beats = None
        self._thread.shutdown(wait=False)
