"""The Responses lifecycle without a server: the status table, the stores' conditional update,
the memory store's bounds, and waiting on the virtual clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mockserver.clock import VirtualClock
from mockserver.lifecycle.runs import legal, wait_until
from mockserver.state.memory import MemoryStore
from mockserver.state.records import Record, Store
from mockserver.state.redis.records import RedisStore
from mockserver.state.sqlite.records import SqliteStore
from tests.state.conftest import redis_server  # noqa: F401  (a real redis-server, for the redis store)
from tests.support.live import FROZEN


@pytest.mark.parametrize(
    ("current", "new", "ok"),
    [
        ("queued", "in_progress", True),
        ("queued", "cancelled", True),
        ("queued", "completed", False),
        ("in_progress", "completed", True),
        ("in_progress", "incomplete", True),
        ("in_progress", "failed", True),
        ("in_progress", "queued", False),
        ("completed", "cancelled", False),
        ("cancelled", "in_progress", False),
    ],
)
def test_status_table(current: str, new: str, ok: bool) -> None:
    assert legal(current, new) is ok


def _record(response_id: str) -> Record:
    return Record(response_id, {"id": response_id, "status": "in_progress"}, (), (("user", "hi"),), True, True)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    clock = VirtualClock(FROZEN)
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        server.flush()
        return RedisStore(server.url, clock)
    return (
        MemoryStore(clock, capacity=3, ttl=60)
        if request.param == "memory"
        else SqliteStore(str(tmp_path / "s.db"), clock)
    )


@pytest.mark.asyncio
async def test_store_conditional_update(store: Store) -> None:
    assert await store.create(_record("resp_a")) and not await store.create(_record("resp_a"))
    done = {"id": "resp_a", "status": "completed"}
    cancel = {"id": "resp_a", "status": "cancelled"}
    event = {"type": "response.completed", "sequence_number": 0}
    wins = await asyncio.gather(
        store.update("resp_a", done, [event], frozenset({"in_progress"})),
        store.update("resp_a", cancel, [], frozenset({"in_progress"})),
    )
    assert sorted(wins) == [False, True]  # exactly one terminal state
    record = await store.get("resp_a")
    assert record is not None and record.status == ("completed" if wins[0] else "cancelled")
    assert record.messages == (("user", "hi"),)
    assert await store.events("resp_a", -1) == ([event] if wins[0] else [])
    assert await store.delete("resp_a") and await store.get("resp_a") is None
    await store.close()


@pytest.mark.asyncio
async def test_memory_store_is_bounded_and_expires() -> None:
    clock = VirtualClock(FROZEN)
    store = MemoryStore(clock, capacity=2, ttl=60)
    for name in ("a", "b", "c"):
        await store.create(_record(name))
    assert await store.get("a") is None and await store.get("c") is not None
    clock.advance(61)
    assert await store.get("c") is None


@pytest.mark.asyncio
async def test_wait_until_wakes_when_the_clock_moves() -> None:
    clock = VirtualClock(FROZEN)
    waiting = asyncio.ensure_future(wait_until(clock, FROZEN + 5))
    await asyncio.sleep(0)
    clock.advance(2)
    await asyncio.sleep(0)
    assert not waiting.done()
    clock.at = FROZEN + 5  # the admin API's "set" wakes it too
    await asyncio.wait_for(waiting, 5)
