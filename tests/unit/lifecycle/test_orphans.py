"""Background responses whose process is gone, in-process: a SQLite file, the lifecycles that
share it, and owner rows written by hand to stand for other processes — dead (a pid that is
gone, a pid now another process's, a host whose heartbeat stopped, no owner at all) or alive
(another store open in this process, a real ``sleep`` child, a host still beating).

The same thing through real servers and a real SIGKILL: tests/reliability/test_crash_recovery.py.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from mockserver.clock import VirtualClock
from mockserver.lifecycle.runs import RESTARTED, SHUT_DOWN, Lifecycle, Run, Status
from mockserver.spine.events import Event, TextDelta
from mockserver.state.owners import place
from mockserver.state.records import Record
from mockserver.state.sqlite.records import LEASE, SqliteStore
from mockserver.wire.json import Json
from tests.support.live import FROZEN

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="owners are judged from /proc")

# An owner row as the owners table holds it: token, pid, place, start, heartbeat (None: no owner).
OwnerRow = tuple[str, int, str, str | None, float] | None


def _start(pid: int) -> str:
    """A process's start time, field 22 of /proc/<pid>/stat (after the parenthesised name)."""
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return data[data.rindex(b")") + 2 :].split()[19].decode()


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """Another live process, to stand for a server that still runs; killed afterwards."""
    proc = subprocess.Popen(["sleep", "120"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _gone() -> OwnerRow:
    """The owner row of a process that has exited and been reaped (here, its true start)."""
    proc = subprocess.Popen(["sleep", "120"])
    start = _start(proc.pid)
    proc.kill()
    proc.wait(timeout=10)
    return ("other", proc.pid, place(), start, time.time())


def _living(proc: subprocess.Popen[bytes]) -> OwnerRow:
    return ("other", proc.pid, place(), _start(proc.pid), time.time())


def _own(path: Path, response_id: str, row: OwnerRow, *, listed: bool = True) -> None:
    """Make ``response_id`` the run of the owner ``row`` (None: of no owner, as in a file
    written before owners were kept), as another process's store would have; ``listed``
    False leaves the owner's row out of the owners table (forgotten as gone)."""
    with sqlite3.connect(path, isolation_level=None) as db:
        if row is not None and listed:
            db.execute("INSERT OR REPLACE INTO owners VALUES (?, ?, ?, ?, ?)", row)
        db.execute("UPDATE responses SET owner = ? WHERE id = ?", (row[0] if row else None, response_id))
    db.close()


async def _running(store: SqliteStore, response_id: str, status: Status) -> None:
    """A background record as a run leaves it half-way: created, queued (and in progress,
    with some text), its events numbered from 0."""
    snapshot: Json = {"id": response_id, "object": "response", "status": "queued", "error": None}
    assert await store.create(Record(response_id, snapshot, (), (("user", "hi"),), background=True, stream=True))
    opening = [
        {"type": "response.created", "response": snapshot, "sequence_number": 0},
        {"type": "response.queued", "response": snapshot, "sequence_number": 1},
    ]
    assert await store.update(response_id, snapshot, opening, frozenset({"queued"}))
    if status == "in_progress":
        moving = {**snapshot, "status": "in_progress"}
        events = [
            {"type": "response.in_progress", "response": moving, "sequence_number": 2},
            {"type": "response.output_text.delta", "delta": "Hel", "sequence_number": 3},
        ]
        assert await store.update(response_id, moving, events, frozenset({"queued"}))


async def _failed_with(store: SqliteStore, response_id: str, message: str) -> list[Json]:
    """Assert ``response_id`` failed with ``message``, its stream closed as a run's own failure
    closes it; its events."""
    record = await store.get(response_id)
    assert record is not None and record.status == "failed"
    assert record.response["error"] == {"code": "server_error", "message": message}
    events = await store.events(response_id, -1)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))  # consecutive, none lost
    assert record.events == len(events)
    assert events[-2]["message"] == message
    assert events[-1]["response"]["status"] == "failed" and events[-1]["response"]["error"]["message"] == message
    return events


async def _status(store: SqliteStore, response_id: str) -> str:
    record = await store.get(response_id)
    assert record is not None
    return record.status


@pytest.fixture
async def writer(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """The store records are created through (the owner rows are then rewritten by hand)."""
    store = SqliteStore(str(tmp_path / "r.db"), VirtualClock(FROZEN))
    yield store
    await store.close()


def _lifecycle(tmp_path: Path, sweep: float = 0.0, **kw: float) -> Lifecycle:
    """A lifecycle on its own store of the shared file (sweep 0: no sweeper unless asked)."""
    clock = VirtualClock(FROZEN)
    return Lifecycle(SqliteStore(str(tmp_path / "r.db"), clock), clock, sweep=sweep, **kw)


# ---- who is gone, who is not -----------------------------------------------------------------

_DEAD: dict[str, Callable[[], OwnerRow]] = {
    "pid-gone": _gone,
    # pid 1 is there, but it did not start at tick 1: the pid names another process now
    "pid-reused": lambda: ("other", 1, place(), "1", time.time()),
    "silent-elsewhere": lambda: ("other", 1, "another-host|boot|ns", None, time.time() - 2 * LEASE),
    "row-forgotten": lambda: ("ghost", 1, place(), None, time.time()),
}


@pytest.mark.parametrize("status", ["queued", "in_progress"])
@pytest.mark.parametrize("owner", list(_DEAD), ids=list(_DEAD))
async def test_a_run_whose_owner_is_gone_is_failed(
    tmp_path: Path, writer: SqliteStore, owner: str, status: Status
) -> None:
    await _running(writer, "resp_orphan", status)
    _own(tmp_path / "r.db", "resp_orphan", _DEAD[owner](), listed=owner != "row-forgotten")
    lifecycle = _lifecycle(tmp_path)
    try:
        stored = len(await writer.events("resp_orphan", -1))
        assert await lifecycle.recover() == 1
        events = await _failed_with(writer, "resp_orphan", RESTARTED)
        assert len(events) == stored + 2  # what was there is kept; the failure comes after it
        assert await lifecycle.recover() == 0
    finally:
        await lifecycle.close()


@pytest.mark.parametrize("owner", ["store-in-this-process", "other-process", "beating-elsewhere"])
async def test_a_run_whose_owner_lives_is_never_failed(
    tmp_path: Path, writer: SqliteStore, sleeper: subprocess.Popen[bytes], owner: str
) -> None:
    await _running(writer, "resp_live", "in_progress")
    if owner == "other-process":
        _own(tmp_path / "r.db", "resp_live", _living(sleeper))
    elif owner == "beating-elsewhere":
        _own(tmp_path / "r.db", "resp_live", ("other", 1, "another-host|boot|ns", None, time.time()))
    # store-in-this-process: the writer, still open, owns it as created.
    lifecycle = _lifecycle(tmp_path, sweep=0.05)
    try:
        assert await lifecycle.recover() == 0
        await asyncio.sleep(0.3)  # several sweeps
        await lifecycle.get("resp_live")  # a first use looks too
        assert await _status(writer, "resp_live") == "in_progress"
    finally:
        await lifecycle.close()
    assert await _status(writer, "resp_live") == "in_progress"  # a close fails only its own runs


async def test_an_owner_that_closes_leaves_orphans(tmp_path: Path, writer: SqliteStore) -> None:
    # A store of this process that closes (a server stopping without failing a run of its own)
    # is gone: its owner row goes with it, and the run is another process's to fail.
    other = SqliteStore(str(tmp_path / "r.db"), VirtualClock(FROZEN))
    await _running(other, "resp_left", "in_progress")
    lifecycle = _lifecycle(tmp_path)
    try:
        assert await lifecycle.recover() == 0
        await other.close()
        assert await lifecycle._fail_orphans(None) == 1
        await _failed_with(writer, "resp_left", RESTARTED)
    finally:
        await lifecycle.close()


async def test_a_file_from_before_owners_counts_its_runs_orphaned(tmp_path: Path) -> None:
    # The schema as it was before kind, seq and owner: opening it migrates in place, with no owner.
    path = tmp_path / "r.db"
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute(
            "CREATE TABLE responses (id TEXT PRIMARY KEY, status TEXT NOT NULL, response TEXT NOT NULL, "
            "input_items TEXT NOT NULL, messages TEXT NOT NULL, background INTEGER NOT NULL, "
            "stream INTEGER NOT NULL, events INTEGER NOT NULL, expires REAL NOT NULL)"
        )
        db.execute("CREATE TABLE events (id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL)")
        db.execute(
            "INSERT INTO responses VALUES ('resp_old', 'in_progress', "
            '\'{"id":"resp_old","status":"in_progress","error":null}\', \'[]\', \'[]\', 1, 0, 1, ?)',
            (FROZEN + 3600,),
        )
        db.execute('INSERT INTO events VALUES (\'resp_old\', 0, \'{"type":"response.created","sequence_number":0}\')')
    db.close()
    lifecycle = _lifecycle(tmp_path)
    try:
        assert await lifecycle.recover() == 1
        await _failed_with(lifecycle.store, "resp_old", RESTARTED)  # type: ignore[arg-type]
    finally:
        await lifecycle.close()


# ---- settling it once ---------------------------------------------------------------------------


async def test_two_lifecycles_racing_settle_each_orphan_once(tmp_path: Path, writer: SqliteStore) -> None:
    ids = [f"resp_{n}" for n in range(6)]
    for n, response_id in enumerate(ids):
        await _running(writer, response_id, "in_progress" if n % 2 else "queued")
        _own(tmp_path / "r.db", response_id, _gone())
    first, second = _lifecycle(tmp_path), _lifecycle(tmp_path)
    try:
        counts = await asyncio.gather(first.recover(), second.recover())
        assert sum(counts) == len(ids)
        for response_id in ids:
            events = await _failed_with(writer, response_id, RESTARTED)
            assert [e["type"] for e in events].count("response.failed") == 1
    finally:
        await first.close()
        await second.close()


# ---- following one -------------------------------------------------------------------------------


async def test_following_an_orphan_ends_with_the_failure(tmp_path: Path, writer: SqliteStore) -> None:
    await _running(writer, "resp_orphan", "in_progress")
    _own(tmp_path / "r.db", "resp_orphan", _gone())
    lifecycle = _lifecycle(tmp_path)
    try:

        async def follow() -> list[Json]:
            return [event async for event in lifecycle.follow("resp_orphan", 1)]

        events = await asyncio.wait_for(follow(), 10)  # the first use fails it: no waiting at all
        assert [e["sequence_number"] for e in events] == [2, 3, 4, 5]
        assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    finally:
        await lifecycle.close()


async def test_a_follower_sees_its_run_die(
    tmp_path: Path, writer: SqliteStore, sleeper: subprocess.Popen[bytes]
) -> None:
    # The owner dies while a stream is being resumed: no sweeper here (sweep 0), so it is the
    # follower that asks, after ORPHAN_CHECK seconds of silence.
    await _running(writer, "resp_dies", "in_progress")
    _own(tmp_path / "r.db", "resp_dies", _living(sleeper))
    lifecycle = _lifecycle(tmp_path)
    seen: list[Json] = []

    async def follow() -> None:
        async for event in lifecycle.follow("resp_dies", -1):
            seen.append(event)

    try:
        following = asyncio.create_task(follow())
        await asyncio.sleep(0.5)
        assert not following.done() and len(seen) == 4  # the stored events, then waiting: it lives
        sleeper.kill()
        sleeper.wait(timeout=10)
        await asyncio.wait_for(following, 15)
        assert [e["type"] for e in seen[-2:]] == ["error", "response.failed"]
        assert [e["sequence_number"] for e in seen] == list(range(6))
    finally:
        await lifecycle.close()


async def test_the_sweeper_fails_a_run_once_its_owner_dies(
    tmp_path: Path, writer: SqliteStore, sleeper: subprocess.Popen[bytes]
) -> None:
    await _running(writer, "resp_swept", "queued")
    _own(tmp_path / "r.db", "resp_swept", _living(sleeper))
    lifecycle = _lifecycle(tmp_path, sweep=0.1)
    try:
        assert await lifecycle.recover() == 0
        sleeper.kill()
        sleeper.wait(timeout=10)
        deadline = time.monotonic() + 15
        while await _status(writer, "resp_swept") == "queued" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # nobody asks: only the sweeper can fail it
        await _failed_with(writer, "resp_swept", RESTARTED)
    finally:
        await lifecycle.close()


# ---- shutting down -------------------------------------------------------------------------------


class _Narrator:
    """The least a run needs: a snapshot, text deltas, and ``completed`` at the end."""

    def __init__(self, response_id: str) -> None:
        self.id = response_id

    def snapshot(self, status: Status, error: Json | None = None) -> Json:
        return {"id": self.id, "object": "response", "status": status, "error": error}

    def narrate(self, event: Event) -> list[Json]:
        return [{"type": "response.output_text.delta", "delta": event.text}] if isinstance(event, TextDelta) else []

    def outcome(self) -> Status:
        return "completed"


def _stuck(started: asyncio.Event) -> Callable[[], Awaitable[AsyncIterator[Event]]]:
    """A source that says one word and then never another."""

    async def events() -> AsyncIterator[Event]:
        yield TextDelta(0, "Hel")
        started.set()
        await asyncio.Event().wait()

    async def source() -> AsyncIterator[Event]:
        return events()

    return source


async def test_close_fails_the_runs_it_stops(tmp_path: Path, writer: SqliteStore) -> None:
    # One run in progress (its queue time already over), one still queued (the virtual clock
    # never reaches its queue's end): the shutdown fails both, each after its stored events.
    lifecycle = _lifecycle(tmp_path, queue_time=10.0)
    started = asyncio.Event()
    for response_id, created in (("resp_busy", FROZEN - 10), ("resp_waiting", FROZEN)):
        narrator = _Narrator(response_id)
        record = Record(response_id, narrator.snapshot("queued"), (), (), background=True, stream=True)
        assert await lifecycle.store.create(record)
        lifecycle.spawn(Run(response_id, narrator, _stuck(started), True, True, created))
    await asyncio.wait_for(started.wait(), 10)
    deadline = time.monotonic() + 10
    while await _status(writer, "resp_waiting") != "queued" or len(await writer.events("resp_busy", -1)) < 4:
        assert time.monotonic() < deadline, "the runs did not get going"
        await asyncio.sleep(0.02)
    assert await _status(writer, "resp_busy") == "in_progress"
    await lifecycle.close()
    busy = await _failed_with(writer, "resp_busy", SHUT_DOWN)
    assert [e["type"] for e in busy][:4] == [
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.output_text.delta",
    ]
    waiting = await _failed_with(writer, "resp_waiting", SHUT_DOWN)
    assert [e["type"] for e in waiting] == ["response.created", "response.queued", "error", "response.failed"]
    after = _lifecycle(tmp_path)
    try:
        assert await after.recover() == 0  # settled once, by the one that stopped them
    finally:
        await after.close()
