"""What only the SQLite engine does (the contract in test_contract.py covers the rest): where its
calls run, what it does when the file is out of reach or locked, and that the file stays small."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from mockserver.clock import SystemClock
from mockserver.state.base import StateUnavailable
from mockserver.state.records import Record
from mockserver.state.sqlite import state as engine
from mockserver.state.sqlite.records import SqliteStore
from mockserver.state.sqlite.state import SqliteState


@pytest_asyncio.fixture
async def opened(tmp_path: Path) -> AsyncIterator[list[SqliteState]]:
    """Closes every state (and its records) a test opens with :func:`_open`."""
    states: list[SqliteState] = []
    yield states
    for state in states:
        await state.close()
        await state.records.close()


def _open(states: list[SqliteState], path: Path, timeout: float = engine.BUSY_TIMEOUT) -> SqliteState:
    state = SqliteState(str(path), SqliteStore(str(path), SystemClock()), timeout=timeout)
    states.append(state)
    return state


class _Lock:
    """Another connection holding the file's write lock (as another process's transaction would)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.db.execute("COMMIT")
        self.db.close()


async def test_a_file_out_of_reach_is_unavailable_until_it_is_not(opened: list[SqliteState], tmp_path: Path) -> None:
    path = tmp_path / "later" / "state.db"
    state = _open(opened, path)
    with pytest.raises(StateUnavailable) as caught:
        await state.ping()
    assert caught.value.where == f"sqlite:{path}" and "unable to open" in str(caught.value)
    path.parent.mkdir()  # the folder appears: the same state opens it on its next call
    await state.ping()
    assert await state.add("n") == 1


async def test_a_file_that_is_no_database_is_unavailable(opened: list[SqliteState], tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"not a database at all, " * 100)
    with pytest.raises(StateUnavailable):
        await _open(opened, path).ping()


async def test_a_lock_held_beyond_the_timeout_is_unavailable_and_reads_go_on(
    opened: list[SqliteState], tmp_path: Path
) -> None:
    path = tmp_path / "state.db"
    state = _open(opened, path, timeout=0.3)
    await state.put("v", b"1")
    lock = _Lock(path)
    try:
        started = time.monotonic()
        with pytest.raises(StateUnavailable) as caught:
            await state.add("n")
        assert 0.3 <= time.monotonic() - started < 3
        assert "locked" in str(caught.value)
        assert await state.get("v") == b"1"  # WAL: a reader never waits for the writer
    finally:
        lock.release()
    assert await state.add("n") == 1  # the failed call counted nothing; the state works again


async def test_a_short_lock_is_waited_for_off_the_event_loop(opened: list[SqliteState], tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = _open(opened, path)
    await state.ping()
    lock = _Lock(path)
    threading.Timer(0.3, lock.release).start()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        assert await state.add("n") == 1
    finally:
        ticker.cancel()
    assert ticks >= 10  # the loop ran on while the call waited ~0.3 s for the lock


async def test_uncontended_calls_never_leave_the_event_loop(
    opened: list[SqliteState], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _open(opened, tmp_path / "state.db")
    await state.ping()  # opening the file is the worker thread's
    slow = []
    monkeypatch.setattr(state, "_slowly", lambda fn: slow.append(fn))
    await state.put("v", b"1")
    await state.exchange(["v"], ["n", "m"])
    await state.push("l", b"x", 5)
    await state.items("l")
    await state.forget("l")
    assert slow == []


async def test_two_threads_with_loops_of_their_own_share_one_state(opened: list[SqliteState], tmp_path: Path) -> None:
    state = _open(opened, tmp_path / "state.db")
    await state.ping()

    async def count(times: int) -> list[int]:
        return [await state.add("n") for _ in range(times)]

    # A test's Python API reaches the state from its own thread and loop while the server's runs.
    other = asyncio.create_task(asyncio.to_thread(asyncio.run, count(300)))
    here = await count(300)
    values = sorted(here + await other)
    assert values == list(range(1, 601))


async def test_lists_are_trimmed_on_disk(opened: list[SqliteState], tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = _open(opened, path)
    for i in range(500):
        await state.push("l", b"%d" % i, 10)
    assert await state.items("l") == [b"%d" % i for i in range(490, 500)]
    with sqlite3.connect(path) as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM state_lists").fetchone()
    assert 10 <= rows <= 10 + engine._TRIM_EVERY


async def test_expired_values_are_swept(opened: list[SqliteState], tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = _open(opened, path)
    for i in range(300):
        await state.put(f"k{i}", b"x", ttl=0.0)
    with sqlite3.connect(path) as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM state_values").fetchone()
    assert rows < 300 - 200


async def test_the_log_is_checkpointed(opened: list[SqliteState], tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = _open(opened, path)
    for i in range(3000):
        await state.put(f"k{i % 50}", b"x" * 200)
        if i % 500 == 0:
            await asyncio.sleep(0.05)  # let the worker thread's checkpoint run
    # Unchecked, 3000 commits of a page or more each would leave a log of 12 MB or more.
    assert (tmp_path / "state.db-wal").stat().st_size < 4_000_000


async def test_the_records_in_the_same_file_outlive_the_state(opened: list[SqliteState], tmp_path: Path) -> None:
    state = _open(opened, tmp_path / "state.db")
    await state.put("v", b"1")
    assert await state.records.create(Record("resp_1", {"id": "resp_1", "status": "completed"}, (), ()))
    await state.forget("")
    await state.close()
    got = await state.records.get("resp_1")  # closing the state leaves its records open
    assert got is not None
    with pytest.raises(StateUnavailable):
        await state.get("v")


async def test_opening_a_file_another_process_is_setting_up_waits_for_it(
    opened: list[SqliteState], tmp_path: Path
) -> None:
    """Two servers started together: one creates the file or switches it to WAL (an exclusive
    lock) while the other opens it. Opening waits, as every other call does, instead of failing."""
    path = tmp_path / "state.db"
    setting_up = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    setting_up.execute("CREATE TABLE other (x)")
    setting_up.execute("BEGIN EXCLUSIVE")  # a new file is not WAL yet: this shuts every reader out

    def release() -> None:
        setting_up.execute("COMMIT")
        setting_up.close()

    threading.Timer(0.3, release).start()
    state = _open(opened, path)
    await state.ping()
    assert await state.add("n") == 1
