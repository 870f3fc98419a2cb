"""The records store's contract, run alike on memory, SQLite and Redis; then what only a shared
store has (Redis here: SQLite's is tests/unit/lifecycle/test_orphans.py): owners, their leases
and heartbeats, and a background run that one store's lifecycle runs while another's follows and
cancels it — two stores on one Redis stand for two server processes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from mockserver.clock import VirtualClock
from mockserver.lifecycle.runs import RESTARTED, Lifecycle, Run, Status
from mockserver.spine.events import Event, TextDelta
from mockserver.state.memory import MemoryStore
from mockserver.state.owners import place
from mockserver.state.records import Query, Record, Store
from mockserver.state.redis.records import OWNERS, RedisStore
from mockserver.state.redis.state import RedisState
from mockserver.state.sqlite.records import SqliteStore
from mockserver.wire.json import Json
from tests.support.live import FROZEN
from tests.support.redis_server import Client, RedisServer

Opener = Callable[[VirtualClock], Store]


@pytest.fixture(params=["memory", "sqlite", "redis"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def opener(engine: str, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens stores of ``engine``, all on the same data (one file, one Redis); closed after."""
    opened: list[Store] = []
    url = ""
    if engine == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        url = server.url

    def open_store(clock: VirtualClock) -> Store:
        store: Store
        if engine == "memory":
            store = MemoryStore(clock, ttl=60)
        elif engine == "sqlite":
            store = SqliteStore(str(tmp_path / "s.db"), clock, 60)
        else:
            store = RedisStore(url, clock, 60)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        await store.close()


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(FROZEN)


@pytest.fixture
def store(opener: Opener, clock: VirtualClock) -> Store:
    return opener(clock)


def _chat(record_id: str, model: str = "m", **metadata: object) -> Record:
    obj = {"id": record_id, "object": "chat.completion", "model": model, "metadata": metadata}
    return Record(record_id, obj, (), (), kind="chat.completion")


def _response(record_id: str, status: str = "in_progress") -> Record:
    obj = {"id": record_id, "status": status, "model": "m", "metadata": {}}
    return Record(record_id, obj, ({"type": "message", "content": "hi ü"},), (("user", "hi"),), True, True)


async def _ids(store: Store, query: Query) -> tuple[list[str], bool]:
    page = await store.find(query)
    assert page is not None
    return [r.id for r in page.records], page.has_more


# ---- the contract ------------------------------------------------------------------------------


async def test_create_get_and_ids_taken(store: Store) -> None:
    record = _response("resp_a")
    assert await store.create(record)
    assert not await store.create(_response("resp_a")) and not await store.create(_chat("resp_a"))
    assert await store.get("resp_a") == record
    assert await store.get("resp_a", "chat.completion") is None and await store.get("nope") is None
    chat = _chat("chat_a", "gpt", k="v")
    assert await store.create(chat) and await store.get("chat_a", "chat.completion") == chat


async def test_conditional_update_one_winner(store: Store) -> None:
    assert await store.create(_response("resp_a"))
    done = {"id": "resp_a", "status": "completed"}
    cancel = {"id": "resp_a", "status": "cancelled"}
    event = {"type": "response.completed", "sequence_number": 0}
    wins = await asyncio.gather(
        store.update("resp_a", done, [event], frozenset({"in_progress"})),
        *(store.update("resp_a", cancel, [], frozenset({"in_progress"})) for _ in range(20)),
    )
    assert sum(wins) == 1  # exactly one terminal state
    record = await store.get("resp_a")
    assert record is not None and record.status == ("completed" if wins[0] else "cancelled")
    assert record.messages == (("user", "hi"),) and record.background and record.stream
    assert await store.events("resp_a", -1) == ([event] if wins[0] else [])
    assert not await store.update("resp_a", done, [], frozenset({"in_progress", "queued"}))
    assert not await store.update("nope", done, [], frozenset({"in_progress"}))


async def test_events_are_numbered_and_sliced(store: Store) -> None:
    assert await store.create(_response("resp_a", "queued"))
    snapshot = {"id": "resp_a", "status": "in_progress"}
    first = [{"type": "t", "n": "é", "sequence_number": n} for n in range(3)]
    assert await store.update("resp_a", snapshot, first, frozenset({"queued"}))
    more = [{"type": "t", "sequence_number": n} for n in range(3, 5)]
    assert await store.update("resp_a", snapshot, more, frozenset({"in_progress"}))
    assert await store.events("resp_a", -1) == first + more
    assert await store.events("resp_a", 2) == more and await store.events("resp_a", 4) == []
    record = await store.get("resp_a")
    assert record is not None and record.events == 5 and record.status == "in_progress"
    assert await store.events("nope", -1) == []


async def test_chat_completions_take_no_conditional_update(store: Store) -> None:
    assert await store.create(_chat("chat_a"))
    assert not await store.update("chat_a", {"status": "completed"}, [], frozenset({""}))


async def test_delete_names_the_kind(store: Store) -> None:
    assert await store.create(_response("resp_a", "queued"))
    assert await store.update("resp_a", {"status": "queued"}, [{"sequence_number": 0}], frozenset({"queued"}))
    assert not await store.delete("resp_a", "chat.completion")
    assert await store.delete("resp_a") and not await store.delete("resp_a")
    assert await store.get("resp_a") is None and await store.events("resp_a", -1) == []
    assert await store.create(_response("resp_a"))  # the id is free again, with no events
    assert await store.events("resp_a", -1) == []


async def test_find_pages_one_kind(store: Store, clock: VirtualClock) -> None:
    db = store
    for i in range(4):
        assert await db.create(_chat(f"c{i}", "odd" if i % 2 else "even", parity="odd" if i % 2 else "even"))
        assert await db.create(_response(f"r{i}", "completed"))
    chat = Query(kind="chat.completion")
    assert await _ids(db, chat) == (["c0", "c1", "c2", "c3"], False)
    assert await _ids(db, Query(kind="response", order="desc", limit=3)) == (["r3", "r2", "r1"], True)
    assert await _ids(db, Query(kind="chat.completion", after="c1", limit=1)) == (["c2"], True)
    assert await _ids(db, Query(kind="chat.completion", after="c2", order="desc")) == (["c1", "c0"], False)
    assert await _ids(db, Query(kind="chat.completion", model="odd")) == (["c1", "c3"], False)
    assert await _ids(db, Query(kind="chat.completion", metadata=(("parity", "even"),), after="c0")) == (["c2"], False)
    assert await db.find(Query(kind="chat.completion", after="r1")) is None  # not one of its kind
    assert await db.find(Query(kind="chat.completion", after="nope")) is None
    assert await db.get("c0") is None and await db.get("c0", "chat.completion") is not None
    assert not await db.delete("c0") and await db.delete("c0", "chat.completion")
    assert await db.find(Query(kind="chat.completion", after="c0")) is None  # deleted
    assert await db.rewrite("c1", {**_chat("c1").response, "metadata": {"k": "v"}}, "chat.completion")
    assert await _ids(db, Query(kind="chat.completion")) == (["c1", "c2", "c3"], False)  # c1 kept its place
    assert await _ids(db, Query(kind="chat.completion", metadata=(("k", "v"),))) == (["c1"], False)
    assert not await db.rewrite("c0", {}, "chat.completion") and not await db.rewrite("r1", {}, "chat.completion")
    assert await db.create(_chat("c0"))  # created again: the newest
    assert await _ids(db, Query(kind="chat.completion")) == (["c1", "c2", "c3", "c0"], False)
    assert await _ids(db, Query(kind="chat.completion", limit=4)) == (["c1", "c2", "c3", "c0"], False)
    clock.advance(61)
    assert await _ids(db, Query(kind="chat.completion")) == ([], False)


async def test_find_filters_on_exact_strings(store: Store) -> None:
    odd = {"a.b": "x", 'ü "q"': "ÿ", "[*]": "\\", "n": "1", "": "empty"}
    assert await store.create(_chat("c0", "", **odd))
    assert await store.create(_chat("c1", "m", n=1, other="x"))  # a number is not the string "1"
    assert await store.create(Record("c2", {"id": "c2", "metadata": None}, (), (), kind="chat.completion"))
    for key, value in odd.items():
        assert await _ids(store, Query(kind="chat.completion", metadata=((key, value),))) == (["c0"], False)
    assert await _ids(store, Query(kind="chat.completion", metadata=(("a.b", "x"), ("n", "2")))) == ([], False)
    assert await _ids(store, Query(kind="chat.completion", model="")) == (["c0"], False)  # "" is a model name
    assert await _ids(store, Query(kind="chat.completion", model="m")) == (["c1"], False)
    assert await _ids(store, Query(kind="chat.completion", metadata=(("other", "x"),))) == (["c1"], False)


async def test_records_expire_on_the_server_clock(store: Store, clock: VirtualClock) -> None:
    assert await store.create(_response("resp_a"))
    clock.advance(59)
    assert await store.get("resp_a") is not None
    clock.advance(1)
    assert await store.get("resp_a") is None
    assert await store.find(Query(kind="response", after="resp_a")) is None
    # (An update of an expired record: memory and Redis refuse it, SQLite still writes it.)
    assert not await store.rewrite("resp_a", {"status": "completed"}, "response")
    assert await store.create(_response("resp_a"))  # expired: its id is free


async def test_clear_forgets_everything(store: Store) -> None:
    for i in range(3):
        assert await store.create(_response(f"r{i}"))
        assert await store.create(_chat(f"c{i}"))
    assert await store.update("r0", {"status": "in_progress"}, [{"sequence_number": 0}], frozenset({"in_progress"}))
    await store.clear()
    for kind, prefix in (("response", "r"), ("chat.completion", "c")):
        assert await store.get(f"{prefix}0", kind) is None  # type: ignore[arg-type]
        assert await _ids(store, Query(kind=kind)) == ([], False)  # type: ignore[arg-type]
    assert await store.events("r0", -1) == []
    assert await store.create(_response("r0"))
    assert await _ids(store, Query(kind="response")) == (["r0"], False)


async def test_another_store_sees_the_same_records(engine: str, opener: Opener, clock: VirtualClock) -> None:
    if engine == "memory":
        pytest.skip("memory is one process's")
    one, two = opener(clock), opener(clock)
    assert await one.create(_chat("c0")) and not await two.create(_chat("c0"))
    assert await two.create(_chat("c1"))
    assert await _ids(one, Query(kind="chat.completion")) == (["c0", "c1"], False)
    assert await one.create(_response("resp_a"))
    wins = await asyncio.gather(
        one.update("resp_a", {"status": "completed"}, [], frozenset({"in_progress"})),
        two.update("resp_a", {"status": "cancelled"}, [], frozenset({"in_progress"})),
    )
    assert sorted(wins) == [False, True]


# ---- Redis: owners, leases, heartbeats ---------------------------------------------------------


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    redis_server.flush()
    return redis_server.url


async def _owner_key(url: str, store: RedisStore, **fields: object) -> None:
    """Rewrite ``store``'s owner key as another process's would be (None: no key at all)."""
    redis = Client(url)
    try:
        if not fields:
            await redis.call("DEL", OWNERS + store.token)
        else:
            flat = [str(part) for pair in fields.items() for part in pair]
            await redis.call("HSET", OWNERS + store.token, *flat)
    finally:
        await redis.close()


@pytest.fixture
async def pair(redis_url: str) -> AsyncIterator[tuple[RedisStore, RedisStore]]:
    """A store that creates running records, with a heartbeat that never comes in a test, and
    the store that judges them."""
    clock = VirtualClock(FROZEN)
    runner = RedisStore(redis_url, clock, heartbeat=3600)
    judge = RedisStore(redis_url, clock, heartbeat=3600)
    try:
        yield runner, judge
    finally:
        await runner.close()
        await judge.close()


async def test_a_live_owners_runs_are_no_orphans(pair: tuple[RedisStore, RedisStore]) -> None:
    runner, judge = pair
    for i, status in enumerate(("queued", "in_progress", "completed")):
        assert await runner.create(_response(f"r{i}", status))
    assert await judge.orphans() == [] and await runner.orphans() == []
    assert await judge.orphans(["r0", "r1", "nope"]) == [] and await judge.orphans([]) == []


async def test_an_owner_that_closes_leaves_orphans_oldest_first(
    redis_url: str, pair: tuple[RedisStore, RedisStore]
) -> None:
    runner, judge = pair
    for i, status in enumerate(("in_progress", "completed", "queued")):
        assert await runner.create(_response(f"r{i}", status))
    assert await judge.create(_response("mine"))
    await runner.close()
    assert [r.id for r in await judge.orphans()] == ["r0", "r2"]
    assert [r.id for r in await judge.orphans(["r2", "mine", "r1", "r2", "r0"])] == ["r0", "r2"]


@pytest.mark.parametrize(
    ("fields", "orphaned"),
    [
        ({}, True),  # the lease expired: the key is gone
        ({"place": "another-host|boot|ns", "heartbeat": time.time() - 60, "pid": 1}, True),  # silent
        ({"place": "another-host|boot|ns", "heartbeat": 2e9, "pid": 1}, False),  # beating elsewhere
        ({"place": place(), "pid": 1, "started": "1"}, True),  # the pid names another process now
    ],
    ids=["key-expired", "silent-elsewhere", "beating-elsewhere", "pid-reused"],
)
async def test_owners_judged_from_afar(
    redis_url: str, pair: tuple[RedisStore, RedisStore], fields: dict[str, object], orphaned: bool
) -> None:
    runner, judge = pair
    assert await runner.create(_response("r0"))
    await _owner_key(redis_url, runner, **fields)
    assert [r.id for r in await judge.orphans()] == (["r0"] if orphaned else [])


async def test_the_heartbeat_outlives_the_lease(redis_url: str) -> None:
    clock = VirtualClock(FROZEN)
    runner = RedisStore(redis_url, clock, heartbeat=0.1, lease=1.0)
    judge = RedisStore(redis_url, clock)
    redis = Client(redis_url)
    try:
        assert await runner.create(_response("r0"))
        await _owner_key(redis_url, runner, place="another-host|boot|ns")  # judged by its lease alone
        await asyncio.sleep(1.5)  # past the lease: only the heartbeats keep the key
        assert 0 < await redis.call("PTTL", OWNERS + runner.token) <= 1000
        assert await judge.orphans() == []
        await runner.close()
        assert await redis.call("EXISTS", OWNERS + runner.token) == 0
        assert [r.id for r in await judge.orphans()] == ["r0"]
    finally:
        await runner.close()
        await judge.close()
        await redis.close()


# ---- Redis: one run, three "processes" ------------------------------------------------------------


class _Narrator:
    def __init__(self, response_id: str) -> None:
        self.id = response_id

    def snapshot(self, status: Status, error: Json | None = None) -> Json:
        return {"id": self.id, "object": "response", "status": status, "error": error}

    def narrate(self, event: Event) -> list[Json]:
        return [{"type": "response.output_text.delta", "delta": event.text}] if isinstance(event, TextDelta) else []

    def outcome(self) -> Status:
        return "completed"


def _words(words: list[str], go: asyncio.Event) -> Callable[[], Awaitable[AsyncIterator[Event]]]:
    """Says the first word, waits for ``go``, then says the rest."""

    async def events() -> AsyncIterator[Event]:
        for n, word in enumerate(words):
            if n == 1:
                await go.wait()
            yield TextDelta(0, word)

    async def source() -> AsyncIterator[Event]:
        return events()

    return source


async def _until(check: Callable[[], Awaitable[bool]]) -> None:
    deadline = time.monotonic() + 10
    while not await check():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


async def test_a_run_on_a_is_followed_on_b_and_cancelled_from_c(redis_url: str) -> None:
    clock = VirtualClock(FROZEN)
    a, b, c = (Lifecycle(RedisStore(redis_url, clock), clock, sweep=0.0) for _ in range(3))
    try:
        go = asyncio.Event()
        narrator = _Narrator("resp_x")
        assert await a.store.create(Record("resp_x", narrator.snapshot("queued"), (), (), True, True))
        a.spawn(Run("resp_x", narrator, _words(["Hel", "lo", "!"], go), True, True, FROZEN))

        async def started() -> bool:
            return len(await b.store.events("resp_x", -1)) >= 4  # created, queued, in_progress, "Hel"

        await _until(started)
        assert (await b.get("resp_x")).status == "in_progress"
        follower = asyncio.ensure_future(_collect(b, "resp_x", 2))  # resumed from starting_after=2
        go.set()
        events = await asyncio.wait_for(follower, 10)
        assert events[0]["sequence_number"] == 3 and events[-1]["type"] == "response.completed"
        assert "".join(e.get("delta", "") for e in events) == "Hello!"
        assert (await c.cancel("resp_x")).status == "completed"  # finished: returned unchanged

        go2 = asyncio.Event()
        assert await a.store.create(Record("resp_y", _Narrator("resp_y").snapshot("queued"), (), (), True, True))
        a.spawn(Run("resp_y", _Narrator("resp_y"), _words(["a", "b"], go2), True, True, FROZEN))

        async def running() -> bool:
            return len(await c.store.events("resp_y", -1)) >= 4

        await _until(running)
        follower = asyncio.ensure_future(_collect(b, "resp_y", -1))
        assert (await c.cancel("resp_y")).status == "cancelled"  # from C, while A runs it
        go2.set()
        events = await asyncio.wait_for(follower, 10)
        assert events[-1]["type"] != "response.completed"
        await asyncio.sleep(0.1)
        record = await a.store.get("resp_y")
        assert record is not None and record.status == "cancelled"  # A's next write lost the race
        assert await b.store.orphans() == []  # A is alive: never an orphan
    finally:
        for lifecycle in (a, b, c):
            await lifecycle.close()


async def test_a_run_whose_store_closed_is_failed_by_another(redis_url: str) -> None:
    clock = VirtualClock(FROZEN)
    a, b = (Lifecycle(RedisStore(redis_url, clock), clock, sweep=0.0) for _ in range(2))
    try:
        assert await a.store.create(Record("resp_z", _Narrator("resp_z").snapshot("in_progress"), (), (), True, True))
        await a.store.close()  # A is gone (without failing its run: a crash)
        assert await b.recover() == 1
        record = await b.store.get("resp_z")
        assert record is not None and record.status == "failed"
        assert record.response["error"]["message"] == RESTARTED
        assert [e["type"] for e in await b.store.events("resp_z", -1)] == ["error", "response.failed"]
    finally:
        await b.close()


async def _collect(lifecycle: Lifecycle, response_id: str, after: int) -> list[Json]:
    return [event async for event in lifecycle.follow(response_id, after)]


# ---- Redis: a database shared with other data --------------------------------------------------


async def test_state_and_records_keep_to_their_namespaces(redis_url: str) -> None:
    clock = VirtualClock(FROZEN)
    store = RedisStore(redis_url, clock)
    state = RedisState(redis_url, store)
    redis = Client(redis_url)
    try:
        await redis.call("SET", "theirs", "1")
        await redis.call("HSET", "mockserverish", "f", "v")
        await state.put("k", b"v")
        await state.map_put("m", "f", b"v")
        await state.push("l", b"v", 3)
        assert await store.create(_response("resp_a"))
        await state.forget("")  # the state's keys, not the records', nor anyone else's
        assert await state.get("k") is None and await state.items("l") == [] and await state.map_all("m") == {}
        assert await store.get("resp_a") is not None
        await state.put("k", b"v")
        await store.clear()  # the records, not the state
        assert await store.get("resp_a") is None and await state.get("k") == b"v"
        assert await redis.call("GET", "theirs") == b"1" and await redis.call("HGET", "mockserverish", "f") == b"v"
        ours = set(await redis.call("KEYS", "*")) - {b"theirs", b"mockserverish"}
        assert ours and all(key.startswith(b"mockserver:") for key in ours)
    finally:
        await state.close()
        await store.close()
        await redis.close()
