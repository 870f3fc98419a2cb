"""What the SQLite engine's two halves share: how a connection is opened, and the write transaction.

:class:`~mockserver.state.sqlite.state.SqliteState` (the state) and
:class:`~mockserver.state.sqlite.records.SqliteStore` (the records) may keep their tables in one
file; each opens its own connections with :func:`connect` and writes under :class:`transaction`.
"""

from __future__ import annotations

import sqlite3

__all__ = ["connect", "transaction"]


def connect(path: str, timeout: float, *, any_thread: bool = False) -> sqlite3.Connection:
    """A connection to ``path`` in autocommit mode (``isolation_level=None``: a transaction is
    only ever an explicit :class:`transaction`) that waits up to ``timeout`` seconds for another
    connection's lock; ``any_thread`` lets other threads than the opener's use it."""
    return sqlite3.connect(path, isolation_level=None, timeout=timeout, check_same_thread=not any_thread)


class transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``: the write lock first, so nothing read inside can change
    before the commit. On an error it ``ROLLBACK``s, unless ``rollback`` is False: then the
    caller rolls back itself (the state's ``_call``, which must see the error as it was raised)."""

    def __init__(self, db: sqlite3.Connection, *, rollback: bool = True) -> None:
        self.db = db
        self.rollback = rollback

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if kind is None:
            self.db.execute("COMMIT")
        elif self.rollback:
            self.db.execute("ROLLBACK")
