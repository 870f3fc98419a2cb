"""The SQLite store (``--store sqlite:PATH``): responses shared by every server process
that opens the same file.

The stdlib ``sqlite3`` in WAL mode (readers never wait for the writer), run off the event
loop on one private thread that owns the connection. The conditional update is one
``BEGIN IMMEDIATE`` transaction (the write lock taken before the status is read), so a
cancel from one process and a run's last write from another cannot both win.

Stored chat completions share the ``responses`` table (``kind`` tells them apart); ``seq``
is the creation order that listing pages through. Files written before those two columns
existed are migrated in place when opened (see :func:`_migrate`).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from mockserver.clock import Clock
from mockserver.http.body import Json
from mockserver.responses.store import Page, Query, Record, RecordKind

__all__ = ["SqliteStore"]

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
    seq INTEGER
);
CREATE TABLE IF NOT EXISTS events (
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (id, seq)
) WITHOUT ROWID;
"""


# What a Record is read from (see _record).
_COLUMNS = "id, response, input_items, messages, background, stream, events, kind"


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
    """Bring a file from before stored chat completions up to date: add ``kind`` (its rows
    are all responses) and ``seq`` (their rowids are their insertion order). In one write
    transaction, so two servers opening the same old file cannot both add a column."""
    with _transaction(db):
        columns = {row[1] for row in db.execute("PRAGMA table_info(responses)")}
        if "kind" not in columns:
            db.execute("ALTER TABLE responses ADD COLUMN kind TEXT NOT NULL DEFAULT 'response'")
        if "seq" not in columns:
            db.execute("ALTER TABLE responses ADD COLUMN seq INTEGER")
            db.execute("UPDATE responses SET seq = rowid")
        db.execute("CREATE INDEX IF NOT EXISTS responses_by_kind ON responses (kind, seq)")


class SqliteStore:
    def __init__(self, path: str, clock: Clock, ttl: float = 2_592_000.0) -> None:
        self._path = path
        self._clock = clock
        self._ttl = ttl
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="mockserver-store")
        self._db: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:  # opened on the store's own thread, used only there
            db = sqlite3.connect(self._path, isolation_level=None, timeout=10.0)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            _migrate(db)
            self._db = db
        return self._db

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
        )

        def insert(db: sqlite3.Connection) -> bool:
            with _transaction(db):
                db.execute(
                    "DELETE FROM events WHERE id IN (SELECT id FROM responses WHERE id = ? AND expires <= ?)",
                    (record.id, now),
                )
                db.execute("DELETE FROM responses WHERE id = ? AND expires <= ?", (record.id, now))
                try:  # the write lock is held, so MAX(seq) + 1 is this process's alone
                    db.execute(
                        "INSERT INTO responses (id, status, response, input_items, messages, background, stream, "
                        "events, expires, kind, seq) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, "
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
            with _transaction(db):
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
            with _transaction(db):
                gone = db.execute("DELETE FROM responses WHERE id = ? AND kind = ?", (response_id, kind)).rowcount
                if gone:
                    db.execute("DELETE FROM events WHERE id = ?", (response_id,))
                return gone > 0

        return await self._run(remove)

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
        def shut(db: sqlite3.Connection) -> None:
            db.close()

        if self._db is not None:
            await self._run(shut)
            self._db = None
        self._thread.shutdown(wait=False)


class _transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error): the write lock first."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")
