"""Stored chat completions with the official SDK, against a memory-store server (the
session's) and a SQLite-store one: store, retrieve, list (filters, order, pages), update
metadata, delete, the messages list, errors, the stores' paging itself, and a SQLite file
from before chat completions were stored."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.clock import VirtualClock
from mockserver.config import Settings
from mockserver.state.memory import MemoryStore
from mockserver.state.records import Query, Record, Store
from mockserver.state.redis.records import RedisStore
from mockserver.state.sqlite.records import SqliteStore
from tests.state.conftest import redis_server  # noqa: F401  (a real redis-server, for the redis store)
from tests.support.live import FROZEN, Borrowed, Live, serve_in_thread
from tests.support.spec import errors, validate

Json = dict[str, Any]


def _sqlite_server(live: Live, path: Path) -> Any:
    assert live.app is not None
    settings = Settings(frozen_time=FROZEN, store=f"sqlite:{path}")
    return serve_in_thread(create_app(settings, backend=Borrowed(live.app.state.ctx.model)))


@pytest.fixture(scope="module")
def sqlite_live(live: Live, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with _sqlite_server(live, tmp_path_factory.mktemp("chat-store") / "store.db") as server:
        yield server


@pytest.fixture(params=["memory", "sqlite"])
def server(request: pytest.FixtureRequest, live: Live) -> Live:
    """The session server (memory store), or one with a SQLite store."""
    return live if request.param == "memory" else request.getfixturevalue("sqlite_live")


@pytest.fixture
def sdk(server: Live) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


@pytest.fixture
def model(request: pytest.FixtureRequest) -> str:
    """A model name of this test's own: list filters by it, so tests see only their records."""
    return f"store-{request.node.name}"


def _create(server: Live, body: Json) -> Json:
    answer = httpx.post(server.base_url + "/chat/completions", json={"max_tokens": 8, **body})
    assert answer.status_code == 200, answer.text
    result: Json = answer.json()
    return result


def _ask(model: str, text: str, **extra: Any) -> Json:
    return {"model": model, "messages": [{"role": "user", "content": text}], "store": True, **extra}


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_stored_completion_is_retrieved_as_answered(sdk: openai.OpenAI, server: Live, model: str, stream: bool) -> None:
    body = _ask(model, "Keep me", metadata={"topic": "kept"})
    if stream:
        chunks = list(sdk.chat.completions.create(**body, max_tokens=8, stream=True))
        completion_id = chunks[0].id
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        stored = sdk.chat.completions.retrieve(completion_id)
        assert stored.choices[0].message.content == text
        # The fold of the stream is the body the same request gets unstreamed.
        answered = _create(server, body)
        assert answered["id"] == completion_id
    else:
        answered = _create(server, body)
        completion_id = answered["id"]
    retrieved = httpx.get(f"{server.base_url}/chat/completions/{completion_id}").json()
    assert retrieved == {**answered, "metadata": {"topic": "kept"}}
    kept = sdk.chat.completions.retrieve(completion_id)
    assert kept.model_dump(exclude_unset=True) == {**answered, "metadata": {"topic": "kept"}}


@pytest.mark.parametrize("store", [None, False], ids=["omitted", "false"])
def test_not_stored_unless_asked(sdk: openai.OpenAI, server: Live, model: str, store: bool | None) -> None:
    body = _ask(model, "Forget me")
    del body["store"]
    if store is not None:
        body["store"] = store
    completion_id = _create(server, body)["id"]
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.chat.completions.retrieve(completion_id)
    assert caught.value.body == {
        "message": f"No chat completion found with id '{completion_id}'.",
        "type": "invalid_request_error",
        "param": "completion_id",
        "code": None,
    }
    assert sdk.chat.completions.list(model=model).data == []


def test_list_filters_orders_and_pages(sdk: openai.OpenAI, server: Live, model: str) -> None:
    ids = [
        _create(server, _ask(model, f"number {i}", metadata={"batch": "ab"[i % 2], "i": str(i)}))["id"]
        for i in range(5)
    ]
    _create(server, _ask(model + "-other", "not this model", metadata={"batch": "a"}))
    listed = sdk.chat.completions.list(model=model)
    assert [c.id for c in listed.data] == ids and listed.has_more is False  # oldest first by default
    assert [c.id for c in sdk.chat.completions.list(model=model, order="desc").data] == ids[::-1]
    first = sdk.chat.completions.list(model=model, limit=2)
    assert [c.id for c in first.data] == ids[:2] and first.has_more is True
    second = sdk.chat.completions.list(model=model, limit=2, after=ids[1])
    assert [c.id for c in second.data] == ids[2:4] and second.has_more is True
    assert [c.id for c in sdk.chat.completions.list(model=model, limit=2, after=ids[3]).data] == ids[4:]
    assert [c.id for c in sdk.chat.completions.list(model=model, limit=2)] == ids  # the SDK's auto-paging
    assert [c.id for c in sdk.chat.completions.list(model=model, limit=2, order="desc")] == ids[::-1]
    batch_a = sdk.chat.completions.list(model=model, metadata={"batch": "a"})
    assert [c.id for c in batch_a.data] == ids[0::2]
    assert [c.id for c in sdk.chat.completions.list(model=model, metadata={"batch": "a", "i": "2"})] == [ids[2]]
    assert sdk.chat.completions.list(model=model, metadata={"batch": "a", "i": "1"}).data == []
    everywhere = [c.id for c in sdk.chat.completions.list(metadata={"batch": "a"}, limit=100)]
    assert set(ids[0::2]) <= set(everywhere) and len(everywhere) > len(ids[0::2])  # the other model too
    raw = httpx.get(server.base_url + "/chat/completions", params={"model": model, "limit": 2}).json()
    assert (raw["object"], raw["first_id"], raw["last_id"], raw["has_more"]) == ("list", ids[0], ids[1], True)
    validate("ChatCompletionList", raw)


def test_update_replaces_metadata(sdk: openai.OpenAI, server: Live, model: str) -> None:
    ids = [_create(server, _ask(model, f"update {i}", metadata={"old": "yes"}))["id"] for i in range(3)]
    updated = sdk.chat.completions.update(ids[1], metadata={"new": "value", "n": "1"})
    assert updated.id == ids[1] and updated.metadata == {"new": "value", "n": "1"}  # replaced, not merged
    assert sdk.chat.completions.retrieve(ids[1]).model_dump() == updated.model_dump()
    assert [c.id for c in sdk.chat.completions.list(model=model, metadata={"new": "value"})] == [ids[1]]
    assert [c.id for c in sdk.chat.completions.list(model=model, metadata={"old": "yes"})] == [ids[0], ids[2]]
    assert [c.id for c in sdk.chat.completions.list(model=model)] == ids  # its place in the order is kept
    raw = httpx.post(f"{server.base_url}/chat/completions/{ids[2]}", json={"metadata": None}).json()
    assert raw["metadata"] == {}
    validate("CreateChatCompletionResponse", raw)


def test_delete(sdk: openai.OpenAI, server: Live, model: str) -> None:
    completion_id = _create(server, _ask(model, "Delete me"))["id"]
    deleted = httpx.delete(f"{server.base_url}/chat/completions/{completion_id}").json()
    assert deleted == {"object": "chat.completion.deleted", "id": completion_id, "deleted": True}
    validate("ChatCompletionDeleted", deleted)
    for attempt in (
        lambda: sdk.chat.completions.retrieve(completion_id),
        lambda: sdk.chat.completions.delete(completion_id),
        lambda: sdk.chat.completions.update(completion_id, metadata={"a": "b"}),
        lambda: sdk.chat.completions.messages.list(completion_id),
    ):
        with pytest.raises(openai.NotFoundError):
            attempt()
    assert sdk.chat.completions.list(model=model).data == []
    again = _create(server, _ask(model, "Delete me"))  # the same request: the same id, stored anew
    assert again["id"] == completion_id
    assert sdk.chat.completions.delete(completion_id).deleted is True


def test_messages_list(sdk: openai.OpenAI, server: Live, model: str) -> None:
    parts = [{"type": "text", "text": "Two "}, {"type": "text", "text": "parts"}]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello", "name": "ann"},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": parts},
    ]
    completion_id = _create(server, {"model": model, "messages": messages, "store": True})["id"]
    listed = sdk.chat.completions.messages.list(completion_id)
    assert listed.has_more is False
    assert [m.model_dump(exclude_none=True) for m in listed.data] == [
        {"id": f"{completion_id}-0", "role": "system", "content": "Be brief."},
        {"id": f"{completion_id}-1", "role": "user", "content": "Hello", "name": "ann"},
        {"id": f"{completion_id}-2", "role": "assistant", "content": "Hi."},
        {"id": f"{completion_id}-3", "role": "user", "content": "Two parts", "content_parts": parts},
    ]
    ids = [m.id for m in listed.data]
    assert [m.id for m in sdk.chat.completions.messages.list(completion_id, limit=3)] == ids  # auto-paging
    page = sdk.chat.completions.messages.list(completion_id, limit=2, order="desc", after=ids[3])
    assert [m.id for m in page.data] == [ids[2], ids[1]] and page.has_more is True
    raw = httpx.get(f"{server.base_url}/chat/completions/{completion_id}/messages").json()
    assert raw["object"] == "list" and (raw["first_id"], raw["last_id"]) == (ids[0], ids[-1])
    # Erratum: the document types each item as an assistant's message (role "assistant",
    # "refusal" required), though its own example lists a user's message; OpenAI sends those
    # two fields as here. Anything else wrong would show.
    problems = errors("ChatCompletionMessageList", raw)
    assert all(("role" in p and "assistant" in p) or "'refusal' is a required" in p for p in problems), problems


def test_kinds_do_not_mix(sdk: openai.OpenAI, server: Live, model: str) -> None:
    """A response is not a chat completion, nor the other way round, in one shared store."""
    completion_id = _create(server, _ask(model, "A chat completion"))["id"]
    response = sdk.responses.create(model=model, input="A response", max_output_tokens=16)
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        sdk.responses.retrieve(completion_id)
    with pytest.raises(openai.NotFoundError):
        sdk.responses.delete(completion_id)
    assert [c.id for c in sdk.chat.completions.list(model=model)] == [completion_id]
    assert sdk.responses.retrieve(response.id).id == response.id


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "param"),
    [
        pytest.param("GET", "?limit=0", None, 400, "limit", id="limit-0"),
        pytest.param("GET", "?limit=101", None, 400, "limit", id="limit-101"),
        pytest.param("GET", "?limit=ten", None, 400, "limit", id="limit-not-int"),
        pytest.param("GET", "?order=sideways", None, 400, "order", id="bad-order"),
        pytest.param("GET", "?after=chatcmpl-nope", None, 400, "after", id="unknown-after"),
        pytest.param("GET", "?metadata=x", None, 400, "metadata", id="metadata-not-deep"),
        pytest.param("GET", "/chatcmpl-nope", None, 404, "completion_id", id="get-unknown"),
        pytest.param("POST", "/chatcmpl-nope", {"metadata": {}}, 404, "completion_id", id="update-unknown"),
        pytest.param("DELETE", "/chatcmpl-nope", None, 404, "completion_id", id="delete-unknown"),
        pytest.param("GET", "/chatcmpl-nope/messages", None, 404, "completion_id", id="messages-unknown"),
        pytest.param("GET", "/{id}/messages?limit=0", None, 400, "limit", id="messages-limit-0"),
        pytest.param("GET", "/{id}/messages?order=up", None, 400, "order", id="messages-bad-order"),
        pytest.param("GET", "/{id}/messages?after=nope", None, 400, "after", id="messages-unknown-after"),
        pytest.param("POST", "/{id}", {"metadata": {f"k{i}": "v" for i in range(17)}}, 400, "metadata",
                     id="17-pairs"),
        pytest.param("POST", "/{id}", {"metadata": {"k" * 65: "v"}}, 400, "metadata", id="long-key"),
        pytest.param("POST", "/{id}", {"metadata": {"k": "v" * 513}}, 400, "metadata.k", id="long-value"),
        pytest.param("POST", "/{id}", {"metadata": {"k": 1}}, 400, "metadata.k", id="value-not-string"),
        pytest.param("POST", "/{id}", {"metadata": ["k"]}, 400, "metadata", id="metadata-not-object"),
        pytest.param("POST", "/{id}", {}, 400, "metadata", id="metadata-missing"),
        pytest.param("POST", "/{id}", {"metadata": {}, "model": "m"}, 400, "model", id="not-metadata"),
        pytest.param("POST", "/{id}", "[]", 400, None, id="not-an-object"),
    ],
)  # fmt: skip
def test_bad_requests(live: Live, method: str, path: str, body: Any, status: int, param: str | None) -> None:
    completion_id = _create(live, _ask("store-bad-requests", "The target"))["id"]
    url = live.base_url + "/chat/completions" + path.replace("{id}", completion_id)
    content = body if isinstance(body, str) else json.dumps(body) if body is not None else None
    answer = httpx.request(method, url, content=content)
    assert answer.status_code == status, answer.text
    validate("ErrorResponse", answer.json())
    assert answer.json()["error"]["param"] == param
    assert httpx.get(f"{live.base_url}/chat/completions/{completion_id}").json()["metadata"] == {}  # unchanged


def test_sdk_raises_on_bad_limits(client: openai.OpenAI) -> None:
    for bad in (0, 101):
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.list(limit=bad)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.update("chatcmpl-any", metadata={str(i): "v" for i in range(17)})


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        pytest.param("PUT", "/chat/completions", 405, id="put-list"),
        pytest.param("DELETE", "/chat/completions", 405, id="delete-list"),
        pytest.param("PATCH", "/chat/completions/chatcmpl-x", 405, id="patch-one"),
        pytest.param("POST", "/chat/completions/chatcmpl-x/messages", 405, id="post-messages"),
        pytest.param("GET", "/chat/completions/chatcmpl-x/nothing", 404, id="no-such-path"),
    ],
)
def test_other_methods(live: Live, method: str, path: str, status: int) -> None:
    answer = httpx.request(method, live.base_url + path)
    assert answer.status_code == status
    validate("ErrorResponse", answer.json())


def test_create_still_answers_posts(client: openai.OpenAI) -> None:
    """The list's GET route beside the create's POST leaves creating as it was."""
    created = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    assert created.object == "chat.completion" and created.choices


# ---- the stores themselves -------------------------------------------------------------


def _chat(record_id: str, model: str = "m", **metadata: str) -> Record:
    obj = {"id": record_id, "object": "chat.completion", "model": model, "metadata": metadata}
    return Record(record_id, obj, (), (), kind="chat.completion")


def _response(record_id: str) -> Record:
    obj = {"id": record_id, "status": "completed", "model": "m", "metadata": {}}
    return Record(record_id, obj, (), (("user", "hi"),))


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Store, VirtualClock]:
    clock = VirtualClock(FROZEN)
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        server.flush()
        return RedisStore(server.url, clock, 60), clock
    chosen: Store = (
        MemoryStore(clock, ttl=60) if request.param == "memory" else SqliteStore(str(tmp_path / "s.db"), clock, 60)
    )
    return chosen, clock


async def _ids(store: Store, query: Query) -> tuple[list[str], bool]:
    page = await store.find(query)
    assert page is not None
    return [r.id for r in page.records], page.has_more


async def test_find_pages_one_kind(store: tuple[Store, VirtualClock]) -> None:
    db, clock = store
    for i in range(4):
        assert await db.create(_chat(f"c{i}", "odd" if i % 2 else "even", parity="odd" if i % 2 else "even"))
        assert await db.create(_response(f"r{i}"))
    chat = Query(kind="chat.completion")
    assert await _ids(db, chat) == (["c0", "c1", "c2", "c3"], False)
    assert await _ids(db, Query(kind="response", order="desc", limit=3)) == (["r3", "r2", "r1"], True)
    assert await _ids(db, Query(kind="chat.completion", after="c1", limit=1)) == (["c2"], True)
    assert await _ids(db, Query(kind="chat.completion", after="c2", order="desc")) == (["c1", "c0"], False)
    assert await _ids(db, Query(kind="chat.completion", model="odd")) == (["c1", "c3"], False)
    assert await _ids(db, Query(kind="chat.completion", metadata=(("parity", "even"),), after="c0")) == (["c2"], False)
    assert await db.find(Query(kind="chat.completion", after="r1")) is None  # not one of its kind
    assert await db.get("c0") is None and await db.get("c0", "chat.completion") is not None
    assert not await db.delete("c0") and await db.delete("c0", "chat.completion")
    assert await db.rewrite("c1", {**_chat("c1").response, "metadata": {"k": "v"}}, "chat.completion")
    assert await _ids(db, Query(kind="chat.completion")) == (["c1", "c2", "c3"], False)  # c1 kept its place
    assert await _ids(db, Query(kind="chat.completion", metadata=(("k", "v"),))) == (["c1"], False)
    assert not await db.rewrite("c0", {}, "chat.completion") and not await db.rewrite("r1", {}, "chat.completion")
    assert await db.create(_chat("c0"))  # created again: the newest
    assert await _ids(db, Query(kind="chat.completion")) == (["c1", "c2", "c3", "c0"], False)
    clock.advance(61)
    assert await _ids(db, Query(kind="chat.completion")) == ([], False)
    await db.close()


_OLD_SCHEMA = """
CREATE TABLE responses (
    id TEXT PRIMARY KEY, status TEXT NOT NULL, response TEXT NOT NULL, input_items TEXT NOT NULL,
    messages TEXT NOT NULL, background INTEGER NOT NULL, stream INTEGER NOT NULL, events INTEGER NOT NULL,
    expires REAL NOT NULL
);
CREATE TABLE events (id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (id, seq)) WITHOUT ROWID;
"""


def _old_file(path: Path) -> None:
    """A store file as the server wrote it before chat completions were stored: two responses."""
    db = sqlite3.connect(path)
    db.executescript(_OLD_SCHEMA)
    for name in ("resp_old1", "resp_old2"):
        obj = json.dumps({"id": name, "object": "response", "status": "completed", "model": "m", "metadata": {}})
        row = (name, "completed", obj, "[]", '[["user", "hi"]]', 0, 0, 0, FROZEN + 3600)
        db.execute("INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    db.commit()
    db.close()


async def test_old_sqlite_file_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_file(path)
    clock = VirtualClock(FROZEN)
    one, two = SqliteStore(str(path), clock), SqliteStore(str(path), clock)  # both migrate at once
    old, also = await asyncio.gather(one.get("resp_old1"), two.get("resp_old2"))
    assert old is not None and old.status == "completed" and old.messages == (("user", "hi"),)
    assert also is not None and also.kind == "response"
    assert await one.create(_response("resp_new")) and await two.create(_chat("chatcmpl-new"))
    assert await _ids(one, Query(kind="response")) == (["resp_old1", "resp_old2", "resp_new"], False)
    assert await _ids(two, Query(kind="chat.completion")) == (["chatcmpl-new"], False)
    await one.close()
    await two.close()


def test_server_on_an_old_sqlite_file(live: Live, tmp_path: Path) -> None:
    """Two servers share an old file: both start, the old response is served, and a chat
    completion stored by one is listed, updated and deleted through the other."""
    path = tmp_path / "old.db"
    _old_file(path)
    with _sqlite_server(live, path) as one, _sqlite_server(live, path) as two:
        a = openai.OpenAI(base_url=one.base_url, api_key="x", max_retries=0)
        b = openai.OpenAI(base_url=two.base_url, api_key="x", max_retries=0)
        assert b.responses.retrieve("resp_old1").status == "completed"
        created = a.chat.completions.create(**_ask("shared", "Shared"), max_tokens=8)
        assert [c.id for c in b.chat.completions.list(model="shared")] == [created.id]
        assert b.chat.completions.update(created.id, metadata={"by": "two"}).metadata == {"by": "two"}
        assert a.chat.completions.retrieve(created.id).metadata == {"by": "two"}
        assert b.chat.completions.delete(created.id).deleted
        with pytest.raises(openai.NotFoundError):
            a.chat.completions.retrieve(created.id)


class _Broken(MemoryStore):
    """A store whose writes fail, as a full disk or a locked file would."""

    async def create(self, record: Record) -> bool:
        raise sqlite3.OperationalError("database is locked")


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_a_failing_store_never_breaks_the_answer(live: Live, stream: bool) -> None:
    assert live.app is not None
    app = create_app(Settings(frozen_time=FROZEN), backend=Borrowed(live.app.state.ctx.model))
    lifecycle = app.state.ctx.responses
    lifecycle.store = _Broken(lifecycle.clock)
    body = {**_ask("store-broken", "Still answered"), "max_tokens": 8}
    with serve_in_thread(app) as server, openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as sdk:
        if stream:
            chunks = list(sdk.chat.completions.create(**body, stream=True))
            assert chunks[0].id.startswith("chatcmpl-") and any(c.choices[0].delta.content for c in chunks[1:-1])
            completion_id = chunks[0].id
        else:
            completion_id = sdk.chat.completions.create(**body).id
        with pytest.raises(openai.NotFoundError):
            sdk.chat.completions.retrieve(completion_id)
