"""Every subsystem's state shared: two apps (as two server processes would be) on one SQLite file
or one Redis behave as one server — scripted and fault rules, counts and sequences, rate limits,
the journal, resets, sessions, replay places, the virtual clock and images served by URL.

In-process: each app runs its own lifespan and is driven through httpx's ASGI transport; the
multi-process fleet is tests/fleet's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from mockserver.app import create_app
from mockserver.cassettes.order import ReplayOrder
from mockserver.clock import SystemClock
from mockserver.config import Settings
from mockserver.state.base import StateUnavailable
from mockserver.state.open import open_state
from mockserver.state.sync import Bridge
from tests.support.redis_server import RedisServer

FROZEN = 1_700_000_000.0
CHAT = "/v1/chat/completions"
ADMIN = "/__mockserver"

Fleet = Callable[..., Awaitable[list[httpx.AsyncClient]]]


@pytest.fixture(params=["sqlite", "redis"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'state.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    server.flush()
    return server.url


@pytest.fixture
async def fleet(shared_url: str) -> AsyncIterator[Fleet]:
    """``await fleet(n, **settings)``: ``n`` apps on the shared state, a client for each."""
    async with contextlib.AsyncExitStack() as stack:

        async def make(n: int = 2, **settings: Any) -> list[httpx.AsyncClient]:
            clients = []
            for _ in range(n):
                app = create_app(Settings(backend="script", state=shared_url, **settings))
                await stack.enter_async_context(app.router.lifespan_context(app))
                client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fleet")
                await stack.enter_async_context(client)
                clients.append(client)
            return clients

        yield make


def chat(text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], **extra}


async def said(client: httpx.AsyncClient, text: str = "hello", session: str | None = None) -> str:
    headers = {"x-mockserver-session": session} if session else {}
    response = await client.post(CHAT, json=chat(text), headers=headers)
    assert response.status_code == 200, response.text
    content: str = response.json()["choices"][0]["message"]["content"]
    return content


async def admin(client: httpx.AsyncClient, method: str, path: str, body: Any = None, **params: str) -> Any:
    response = await client.request(method, f"{ADMIN}/{path}", json=body, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def app_of(client: httpx.AsyncClient) -> Starlette:
    transport = client._transport
    assert isinstance(transport, httpx.ASGITransport)
    app = transport.app
    assert isinstance(app, Starlette)
    return app


# ---- scripted answers --------------------------------------------------------------------------


async def test_a_rule_added_on_a_answers_on_b_and_is_listed_there(fleet: Fleet) -> None:
    a, b = await fleet()
    await admin(a, "POST", "answers", {"text": "Sunny on every worker.", "match": "weather"})
    assert await said(b, "what's the weather?") == "Sunny on every worker."
    listed = await admin(b, "GET", "answers")
    assert [r["text"] for r in listed["rules"]] == ["Sunny on every worker."]
    rule_id = listed["rules"][0]["id"]
    await admin(b, "DELETE", f"answers/{rule_id}")
    assert (await admin(a, "GET", "answers"))["rules"] == []


async def test_without_the_injector_a_request_still_sees_new_rules(fleet: Fleet) -> None:
    a, b = await fleet(injector=False)
    await admin(a, "POST", "answers", {"text": "first"})
    assert await said(b) == "first"
    await admin(a, "DELETE", "answers")
    await admin(a, "POST", "answers", {"text": "second"})
    assert await said(b) == "second"


async def test_the_python_api_writes_to_the_shared_state_from_a_test_thread(fleet: Fleet) -> None:
    a, b = await fleet()
    script = app_of(a).state.ctx.script
    rule = await asyncio.to_thread(script.add, text="from Python")
    assert await said(b) == "from Python"
    assert [r.id for r in await asyncio.to_thread(app_of(b).state.ctx.script.rules)] == [rule.id]


async def test_concurrent_sequences_hand_out_each_step_once(fleet: Fleet) -> None:
    a, b = await fleet()
    steps = [f"step {n}" for n in range(24)]
    await admin(a, "POST", "answers", {"sequence": steps, "then": "error"})
    got = await asyncio.gather(*(said(a if n % 2 else b) for n in range(24)))
    assert sorted(got, key=lambda s: int(s.split()[1])) == steps
    past = await b.post(CHAT, json=chat())
    assert past.status_code == 400 and past.json()["error"]["code"] == "script_exhausted"


async def test_a_sequence_behind_a_counted_rule_still_hands_out_each_step_once(fleet: Fleet) -> None:
    a, b = await fleet()
    steps = [f"step {n}" for n in range(10)]
    await admin(a, "POST", "answers", [{"text": "the second call", "nth": 2}, {"sequence": steps, "then": "error"}])
    got = await asyncio.gather(*(said(a if n % 2 else b) for n in range(11)))
    assert got.count("the second call") == 1
    assert sorted(s for s in got if s.startswith("step")) == sorted(steps)


async def test_nth_counts_per_session_across_the_fleet(fleet: Fleet) -> None:
    a, b = await fleet()
    await admin(a, "POST", "answers", [{"text": "the first call", "nth": 1}, {"text": "later"}])
    assert await said(a, session="s1") == "the first call"
    assert await said(b, session="s1") == "later"  # s1's second call, on the other app
    assert await said(b, session="s2") == "the first call"  # s2 counts its own
    assert await said(a, session="s2") == "later"


async def test_a_session_rule_answers_its_session_only(fleet: Fleet) -> None:
    a, b = await fleet()
    await admin(a, "POST", "answers", {"text": "global"})
    await admin(a, "POST", "answers", {"text": "s1's own"}, session="s1")
    assert await said(b, session="s1") == "s1's own"
    assert await said(b, session="s2") == "global"
    assert [r["text"] for r in (await admin(b, "GET", "answers", session="s1"))["rules"]] == ["s1's own"]


# ---- fault rules, rate limits ------------------------------------------------------------------


async def test_a_fault_rule_added_on_a_fails_the_first_call_on_b_only(fleet: Fleet) -> None:
    a, b = await fleet()
    await admin(a, "POST", "answers", {"text": "ok"})
    await admin(a, "POST", "rules", {"faults": "http.503", "times": 1})
    assert (await b.post(CHAT, json=chat())).status_code == 503
    assert (await a.post(CHAT, json=chat())).status_code == 200  # the rule's one time was spent on B
    assert len((await admin(b, "GET", "rules"))["rules"]) == 1


async def test_a_fault_rules_times_are_spent_once_across_the_fleet_under_concurrency(fleet: Fleet) -> None:
    a, b = await fleet()
    await admin(a, "POST", "answers", {"text": "ok"})
    await admin(b, "POST", "rules", {"faults": "http.503", "times": 5})
    answers = await asyncio.gather(*((a if n % 2 else b).post(CHAT, json=chat()) for n in range(20)))
    assert sorted(r.status_code for r in answers) == [200] * 15 + [503] * 5


async def test_six_rpm_across_the_fleet_refuses_the_seventh(fleet: Fleet, shared_url: str, tmp_path: Path) -> None:
    apps = await fleet(3, rate_limit_rpm=6)
    await admin(apps[0], "POST", "answers", {"text": "ok"})
    secret = "sk-never-stored-in-clear"
    headers = {"authorization": f"Bearer {secret}"}
    statuses = [(await apps[n % 3].post(CHAT, json=chat(), headers=headers)).status_code for n in range(7)]
    assert statuses == [200] * 6 + [429]
    refused = await apps[1].post(CHAT, json=chat(), headers=headers)
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    if shared_url.startswith("sqlite:"):  # the API key is hashed before it names a bucket
        stored = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
        assert secret.encode() not in stored


# ---- the journal, resets -----------------------------------------------------------------------


async def test_the_journal_on_b_holds_every_request_in_order(fleet: Fleet) -> None:
    a, b = await fleet()
    await admin(a, "POST", "answers", {"text": "ok"})
    for n in range(6):
        await said(a if n % 2 else b, f"request {n}", session='j "x')
    entries = (await admin(b, "GET", "journal", session='j "x'))["entries"]
    assert [e["body"]["messages"][0]["content"] for e in entries] == [f"request {n}" for n in range(6)]
    ids = [e["id"] for e in entries]
    assert ids == sorted(set(ids))
    assert all(e["status"] == 200 and e["ended"] == "done" for e in entries)
    assert (await admin(a, "GET", "journal", session='j "x'))["entries"] == entries


async def test_a_view_of_the_journals_end_reads_the_end_only(fleet: Fleet) -> None:
    """The console's page and live feed read the newest entries, not the fleet's whole list."""
    a, b = await fleet()
    await admin(a, "POST", "answers", {"text": "ok"})
    for n in range(12):
        await said(a if n % 2 else b, f"request {n}", session="end")
    journal = app_of(b).state.ctx.chaos.journal
    last, whole = await journal.alast(5, "end")
    assert not whole and [e.body["messages"][0]["content"] for e in last] == [f"request {n}" for n in range(7, 12)]
    everything, whole = await journal.alast(100, "end")
    assert whole and everything == await journal.aentries("end") and len(everything) == 12
    assert await journal.anewer(everything[-4].id, "end") == everything[-3:]
    assert await journal.anewer(0, "end") == everything  # read further back until it covers ``after``


async def test_a_busy_session_cannot_push_a_quiet_ones_entries_out_of_its_journal(fleet: Fleet) -> None:
    a, b = await fleet(journal_size=3)
    await admin(a, "POST", "answers", {"text": "ok"})
    await said(a, "quiet one", session="quiet")
    for n in range(5):
        await said(b if n % 2 else a, f"busy {n}", session="busy")
    quiet = (await admin(b, "GET", "journal", session="quiet"))["entries"]
    assert [e["body"]["messages"][0]["content"] for e in quiet] == ["quiet one"]
    busy = (await admin(b, "GET", "journal", session="busy"))["entries"]
    assert [e["body"]["messages"][0]["content"] for e in busy] == ["busy 2", "busy 3", "busy 4"]
    everything = (await admin(a, "GET", "journal"))["entries"]
    assert len(everything) == 3  # the shared list is bounded too: the newest three


async def test_clearing_one_sessions_journal_on_a_clears_it_on_b_only_for_that_session(fleet: Fleet) -> None:
    a, b = await fleet()
    await admin(a, "POST", "answers", {"text": "ok"})
    await said(a, session="s1")
    await said(b, session="s2")
    await admin(a, "DELETE", "journal", session="s1")
    assert (await admin(b, "GET", "journal", session="s1"))["entries"] == []
    assert len((await admin(b, "GET", "journal", session="s2"))["entries"]) == 1
    await said(b, session="s1")  # after the clear: seen again
    assert len((await admin(a, "GET", "journal", session="s1"))["entries"]) == 1
    await admin(b, "DELETE", "journal")
    assert (await admin(a, "GET", "journal"))["entries"] == []


async def test_a_session_reset_on_b_resets_that_session_across_the_fleet(fleet: Fleet) -> None:
    a, b = await fleet()
    await admin(a, "POST", "answers", {"text": "global", "nth": 1})
    await admin(a, "POST", "answers", {"text": "later"})
    for session in ("s1", "s2"):
        await admin(a, "POST", "answers", {"text": f"{session}'s"}, session=session)
        await admin(a, "POST", "rules", {"faults": "http.500", "times": 1, "path": "/v1/none"}, session=session)
        await said(a, session=session)
    await admin(b, "POST", "reset", session="s1")
    assert (await admin(a, "GET", "answers", session="s1"))["rules"] == []
    assert (await admin(a, "GET", "rules", session="s1"))["rules"] == []
    assert (await admin(a, "GET", "journal", session="s1"))["entries"] == []
    assert await said(a, session="s1") == "global"  # its counts start again: the first call
    assert len((await admin(a, "GET", "answers", session="s2"))["rules"]) == 1  # s2 untouched
    assert len((await admin(b, "GET", "journal", session="s2"))["entries"]) == 1
    await admin(a, "POST", "reset")
    for client in (a, b):
        assert (await admin(client, "GET", "answers"))["rules"] == []
        assert (await admin(client, "GET", "rules"))["rules"] == []
        assert (await admin(client, "GET", "journal"))["entries"] == []


async def test_a_session_name_never_reaches_another_sessions_keys(fleet: Fleet) -> None:
    a, b = await fleet()
    await admin(a, "POST", "answers", {"text": "first", "nth": 1})
    await admin(a, "POST", "answers", {"text": "later"})
    names = ["s", "s:", "s*", "s:c:1", "x73"]  # x73 is how "s" is spelled in keys
    for name in names:
        assert await said(a, session=name) == "first"
    await admin(b, "POST", "reset", session="s")
    assert await said(b, session="s") == "first"  # its counts start again...
    for name in names[1:]:
        assert await said(b, session=name) == "later"  # ...and no one else's did


# ---- replay places, the clock, images ----------------------------------------------------------


async def test_replay_places_are_counted_across_processes(shared_url: str) -> None:
    states = [open_state(shared_url, SystemClock()) for _ in range(2)]
    try:
        orders = [ReplayOrder(Bridge(s)) for s in states]
        key = ("cassette", ("POST", "/v1/chat/completions", b"digest"), False)
        places = [await orders[n % 2].take("s", key) for n in range(4)]
        assert places == [0, 1, 2, 3]
        assert await orders[1].take("other", key) == 0
        await orders[0].aclear("s")
        assert await orders[1].take("s", key) == 0
        assert await orders[0].take("other", key) == 1
    finally:
        for state in states:
            await state.close()


async def test_the_clock_moved_on_a_moves_b_and_wakes_a_background_response_there(fleet: Fleet) -> None:
    a, b = await fleet(frozen_time=FROZEN, responses_queue_time=5.0)
    await admin(a, "POST", "answers", {"text": "Woken up."})
    created = await b.post("/v1/responses", json={"model": "gpt-4o-mini", "input": "wait", "background": True})
    assert created.status_code == 200, created.text
    response_id = created.json()["id"]
    await asyncio.sleep(0.1)
    assert (await b.get(f"/v1/responses/{response_id}")).json()["status"] == "queued"
    moved = await admin(a, "POST", "clock", {"advance": 60})
    assert moved["now"] == FROZEN + 60
    clock_b = app_of(b).state.ctx.clock
    for _ in range(100):  # no request reaches B: its waiter's watch on the shared clock moves it
        if clock_b.now() == FROZEN + 60:
            break
        await asyncio.sleep(0.01)
    assert clock_b.now() == FROZEN + 60
    assert (await admin(b, "GET", "clock"))["now"] == FROZEN + 60
    for _ in range(200):  # B's waiter hears the shared clock within a few of its looks
        status = (await b.get(f"/v1/responses/{response_id}")).json()["status"]
        if status == "completed":
            break
        await asyncio.sleep(0.02)
    assert status == "completed"
    watching = app_of(b).state.ctx.refresh._watching
    for _ in range(50):  # nobody waits any more: the watch stops
        if watching is None or watching.done():
            break
        await asyncio.sleep(0.02)
    assert watching is None or watching.done()


async def test_clock_advances_on_a_and_b_at_the_same_moment_all_count(fleet: Fleet) -> None:
    a, b = await fleet(frozen_time=FROZEN)
    await asyncio.gather(*(admin(a if n % 2 else b, "POST", "clock", {"advance": 1.5}) for n in range(40)))
    assert (await admin(a, "GET", "clock"))["now"] == FROZEN + 60
    assert (await admin(b, "GET", "clock"))["now"] == FROZEN + 60
    assert (await admin(b, "POST", "clock", {"set": FROZEN + 7.25}))["now"] == FROZEN + 7.25
    assert (await admin(a, "GET", "clock"))["now"] == FROZEN + 7.25
    assert (await admin(a, "POST", "clock", {"advance": 0.75}))["now"] == FROZEN + 8


async def test_an_image_url_answered_by_a_is_served_by_b(fleet: Fleet) -> None:
    a, b = await fleet()
    made = await a.post("/v1/images/generations", json={"prompt": "a lake", "response_format": "url"})
    assert made.status_code == 200, made.text
    url = httpx.URL(made.json()["data"][0]["url"])
    served = await b.get(url.path)
    assert served.status_code == 200 and served.content.startswith(b"\x89PNG")
    assert (await b.get("/images/img-0000.png")).status_code == 404


# ---- the state lost ----------------------------------------------------------------------------


@pytest.mark.parametrize("injector", [True, False])
async def test_a_state_that_cannot_be_reached_is_a_503_the_client_may_retry(injector: bool, tmp_path: Path) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    app = create_app(Settings(backend="script", state=f"sqlite:{folder / 'state.db'}", injector=injector))
    transport = httpx.ASGITransport(app=app)
    client = httpx.AsyncClient(transport=transport, base_url="http://x")
    async with app.router.lifespan_context(app), client:
        await admin(client, "POST", "answers", {"text": "ok"})
        refresh = app.state.ctx.refresh

        async def unreachable(journal: bool) -> int:
            raise StateUnavailable("sqlite:gone", "test")

        refresh.begin = unreachable
        lost = await client.post(CHAT, json=chat())
        assert lost.status_code == 503, lost.text
        assert lost.headers["x-should-retry"] == "true"
        assert lost.json()["error"]["code"] == "state_unavailable"


async def test_a_lost_redis_is_a_503_with_should_retry_then_service_comes_back() -> None:
    from tests.support.redis_server import binary

    if binary() is None:
        pytest.skip("no redis-server")
    with RedisServer(appendonly=True, appendfsync="always") as server:
        app = create_app(Settings(backend="script", state=server.url))
        transport = httpx.ASGITransport(app=app)
        client = httpx.AsyncClient(transport=transport, base_url="http://x")
        async with app.router.lifespan_context(app), client:
            await admin(client, "POST", "answers", {"text": "ok"})
            server.stop()
            for path, method in ((CHAT, "POST"), (f"{ADMIN}/answers", "GET"), (f"{ADMIN}/journal", "GET")):
                lost = await client.request(method, path, json=chat() if method == "POST" else None)
                assert lost.status_code == 503, (path, lost.text)
                assert lost.headers["x-should-retry"] == "true"
                assert lost.json()["error"]["code"] == "state_unavailable"
            server.start()
            for _ in range(100):
                back = await client.post(CHAT, json=chat())
                if back.status_code == 200:
                    break
                await asyncio.sleep(0.05)
            assert back.status_code == 200, back.text


@pytest.mark.parametrize("looked_meanwhile", [True, False])
async def test_rules_are_read_again_after_the_state_was_lost_and_came_back_empty(looked_meanwhile: bool) -> None:
    from tests.support.redis_server import binary

    if binary() is None:
        pytest.skip("no redis-server")
    with RedisServer() as server:  # no persistence: a restart comes back empty
        async with contextlib.AsyncExitStack() as stack:
            clients = []
            for _ in range(2):
                app = create_app(Settings(backend="script", state=server.url))
                await stack.enter_async_context(app.router.lifespan_context(app))
                client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x")
                clients.append(await stack.enter_async_context(client))
            a, b = clients
            await admin(a, "POST", "answers", {"text": "before"})
            assert await said(b) == "before"
            server.stop()
            if looked_meanwhile:  # B's look fails: its copy is stale
                assert (await b.post(CHAT, json=chat())).status_code == 503
            server.start()
            for _ in range(100):  # A writes again: script:version counts from 0 to what B has seen
                added = await a.post(f"{ADMIN}/answers", json={"text": "after"})
                if added.status_code == 200:
                    break
                await asyncio.sleep(0.05)
            assert await said(b) == "after"
