"""The SQLite store (``--store sqlite:PATH``): responses shared by every server process
that opens the same file.

The stdlib ``sqlite3`` in WAL mode (readers never wait for the writer), run off the event
loop on one private thread that owns the connection. The conditional update is one
``BEGIN IMMEDIATE`` transaction (the write lock taken before the status is read), so a
cancel from one process and a run's last write from another cannot both win.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from mockserver.clock import Clock
from mockserver.store import Json, Record

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
    expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (id, seq)
) WITHOUT ROWID;
"""


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


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
        )

        def insert(db: sqlite3.Connection) -> bool:
            with _transaction(db):
                db.execute(
                    "DELETE FROM events WHERE id IN (SELECT id FROM responses WHERE id = ? AND expires <= ?)",
                    (record.id, now),
                )
                db.execute("DELETE FROM responses WHERE id = ? AND expires <= ?", (record.id, now))
                try:
                    db.execute("INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)", row)
                except sqlite3.IntegrityError:
                    return False
            return True

        return await self._run(insert)

    async def get(self, response_id: str) -> Record | None:
        now = self._clock.now()

        def select(db: sqlite3.Connection) -> Record | None:
            row = db.execute(
                "SELECT response, input_items, messages, background, stream, events FROM responses "
                "WHERE id = ? AND expires > ?",
                (response_id, now),
            ).fetchone()
            if row is None:
                return None
            messages = tuple((role, text) for role, text in json.loads(row[2]))
            items = tuple(json.loads(row[1]))
            return Record(response_id, json.loads(row[0]), items, messages, bool(row[3]), bool(row[4]), row[5])

        return await self._run(select)

    async def update(self, response_id: str, response: Json, events: Sequence[Json], expect: frozenset[str]) -> bool:
        body, status = _dumps(response), str(response["status"])
        rows = [(response_id, e["sequence_number"], _dumps(e)) for e in events]

        def write(db: sqlite3.Connection) -> bool:
            with _transaction(db):
                row = db.execute("SELECT status FROM responses WHERE id = ?", (response_id,)).fetchone()
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

    async def delete(self, response_id: str) -> bool:
        def remove(db: sqlite3.Connection) -> bool:
            with _transaction(db):
                db.execute("DELETE FROM events WHERE id = ?", (response_id,))
                return db.execute("DELETE FROM responses WHERE id = ?", (response_id,)).rowcount > 0

        return await self._run(remove)

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
