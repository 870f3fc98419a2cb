"""Answers the edge remembers for requests asked again (mockserver.edge.repeats): a repeat is
the same bytes, journaled and counted as the first was, and it is never used once anything it
stood on moved (a rule, a count, a fault, the clock, a cassette's place)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.spine.backend import Ask
from mockserver.spine.events import Event
from tests.support.live import FROZEN, Live, serve_in_thread

BODY: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Where is my order?"}]}


@pytest.fixture
def live() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(backend="script", frozen_time=FROZEN))) as live:
        yield live


class _Counted:
    """A backend's ``answer`` that counts the asks it is given (a repeat asks nobody)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asks = 0

    def __call__(self, ask: Ask) -> AsyncIterator[Event]:
        self.asks += 1
        result: AsyncIterator[Event] = self.answer(ask)
        return result


def _counted(live: Live, name: str, monkeypatch: pytest.MonkeyPatch) -> _Counted:
    assert live.app is not None
    backend = live.app.state.ctx.chain.get(name)
    counted = _Counted(backend.answer)
    monkeypatch.setattr(backend, "answer", counted)
    return counted


def _post(client: httpx.Client, body: dict[str, Any] = BODY, **headers: str) -> httpx.Response:
    response = client.post("/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response


def _without_date(response: httpx.Response) -> tuple[list[tuple[str, str]], bytes]:
    return [(k, v) for k, v in response.headers.items() if k != "date"], response.content


def test_a_repeat_is_the_same_bytes_journaled_and_counted(live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    httpx.post(live.url + "/__mockserver/answers", json={"text": "It ships on Monday."}).raise_for_status()
    asked = _counted(live, "script", monkeypatch)
    with httpx.Client(base_url=live.url) as client:
        first = _post(client)
        again = [_post(client) for _ in range(3)]
        for stream in (False, True):  # a stream is remembered too
            body = {**BODY, "stream": True} if stream else {**BODY, "n": 1}
            made = _post(client, body)
            assert _without_date(_post(client, body)) == _without_date(made)
        journal = client.get("/__mockserver/journal").json()["entries"]
        metrics = client.get("/metrics").text
    assert first.json()["choices"][0]["message"]["content"] == "It ships on Monday."
    assert all(_without_date(r) == _without_date(first) for r in again)
    assert asked.asks == 3  # the first of each of the three bodies; every repeat was remembered
    chats = [e for e in journal if e["path"] == "/v1/chat/completions"]
    assert len(chats) == 8
    assert {e["origin"] for e in chats} == {"rule 1"}
    assert all(e["status"] == 200 and e["ended"] == "done" for e in chats)
    streamed = [e for e in chats if e["events"]]
    assert len(streamed) == 2 and streamed[0]["events"] == streamed[1]["events"]
    line = next(x for x in metrics.splitlines() if x.startswith("mockserver_requests_total{") and "chat" in x)
    assert line.endswith(" 8.0"), line
    tokens = [x for x in metrics.splitlines() if x.startswith("mockserver_tokens_total{") and "completion" in x]
    assert tokens and tokens[0].endswith(f" {8 * first.json()['usage']['completion_tokens']}.0"), tokens


def test_nothing_it_stood_on_may_move(live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    assert live.app is not None
    ctx = live.app.state.ctx
    ctx.script.add(text="First answer.")
    asked = _counted(live, "script", monkeypatch)
    with httpx.Client(base_url=live.url) as client:
        assert _post(client).json()["choices"][0]["message"]["content"] == "First answer."
        _post(client)
        assert asked.asks == 1
        # A rule added before it, through the Python API (the rules' version moves).
        ctx.script.clear()
        ctx.script.add(text="Second answer.")
        assert _post(client).json()["choices"][0]["message"]["content"] == "Second answer."
        # The clock: another second is another `created`.
        created = _post(client).json()["created"]
        ctx.clock.advance(3)
        assert _post(client).json()["created"] == created + 3
        # A fault rule: every request is decided again.
        client.post("/__mockserver/faults", json={"faults": "http.500"}).raise_for_status()
        assert client.post("/v1/chat/completions", json=BODY).status_code == 500
        client.delete("/__mockserver/faults").raise_for_status()
        assert _post(client).json()["choices"][0]["message"]["content"] == "Second answer."
        # A fault asked by header is no repeat either.
        faulted = client.post("/v1/chat/completions", json=BODY, headers={"x-mockserver-fault": "http.429"})
        assert faulted.status_code == 429
    assert asked.asks == 4  # first, a new rule, a new second, after the admin writes; the rest remembered


def test_a_counting_rule_is_asked_every_time(live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    assert live.app is not None
    ctx = live.app.state.ctx
    ctx.script.add(text="Only twice.", times=2)
    ctx.script.add(text="Then this.")
    asked = _counted(live, "script", monkeypatch)
    with httpx.Client(base_url=live.url) as client:
        said = [_post(client).json()["choices"][0]["message"]["content"] for _ in range(4)]
        # A sequence moves on with every call, per session.
        ctx.script.clear()
        ctx.script.add(sequence=[{"text": "one"}, {"text": "two"}, {"text": "three"}])
        steps = [
            _post(client, **{"x-mockserver-session": "s"}).json()["choices"][0]["message"]["content"] for _ in range(3)
        ]
    assert said == ["Only twice.", "Only twice.", "Then this.", "Then this."]
    assert steps == ["one", "two", "three"]
    assert asked.asks == 7


def test_a_cassette_replays_its_recordings_in_order_then_the_last_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve_in_thread(create_app(Settings(backend="script", frozen_time=FROZEN))) as upstream:
        script = upstream.app.state.ctx.script if upstream.app is not None else None
        assert script is not None
        script.add(sequence=[{"text": "recorded one"}, {"text": "recorded two"}])
        recording = Settings(cassettes=str(tmp_path), record_mode="all", upstream=upstream.url, frozen_time=FROZEN)
        with serve_in_thread(create_app(recording)) as recorder, httpx.Client(base_url=recorder.url) as client:
            _post(client)
            _post(client)
    with serve_in_thread(create_app(Settings(cassettes=str(tmp_path), frozen_time=FROZEN))) as live:
        asked = _counted(live, "replay", monkeypatch)
        with httpx.Client(base_url=live.url) as client:
            said = [_post(client).json()["choices"][0]["message"]["content"] for _ in range(5)]
            assert asked.asks == 2  # one, then two: at the last recording, the rest were remembered
            assert live.app is not None
            live.app.state.ctx.chaos.replay.clear()  # places forgotten: the cassette starts again
            said.append(_post(client).json()["choices"][0]["message"]["content"])
    assert said == ["recorded one", "recorded two", "recorded two", "recorded two", "recorded two", "recorded one"]


def test_an_answer_past_the_budget_is_not_remembered(live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    from mockserver.edge import repeats

    assert live.app is not None
    live.app.state.ctx.script.add(text="A long answer.")
    monkeypatch.setattr(repeats, "BIGGEST", 64)  # bytes: every chat answer is bigger
    asked = _counted(live, "script", monkeypatch)
    with httpx.Client(base_url=live.url) as client:
        said = {_post(client).json()["choices"][0]["message"]["content"] for _ in range(3)}
    assert said == {"A long answer."}
    assert asked.asks == 3


def test_a_replayed_stream_is_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = {**BODY, "stream": True}
    with serve_in_thread(create_app(Settings(backend="script", frozen_time=FROZEN))) as upstream:
        assert upstream.app is not None
        upstream.app.state.ctx.script.add(text="A recorded stream.")
        recording = Settings(cassettes=str(tmp_path), record_mode="all", upstream=upstream.url, frozen_time=FROZEN)
        with serve_in_thread(create_app(recording)) as recorder, httpx.Client(base_url=recorder.url) as client:
            recorded = _post(client, stream).content
    with serve_in_thread(create_app(Settings(cassettes=str(tmp_path), frozen_time=FROZEN))) as live:
        asked = _counted(live, "replay", monkeypatch)
        with httpx.Client(base_url=live.url) as client:
            replayed = [_post(client, stream) for _ in range(3)]
            journal = client.get("/__mockserver/journal").json()["entries"]
    assert [r.content for r in replayed] == [recorded] * 3
    assert all(r.headers["x-mockserver-source"] == "replay" for r in replayed)
    assert asked.asks == 1
    events = [e["events"] for e in journal if e["path"] == "/v1/chat/completions"]
    assert len(events) == 3 and events[0] > 3 and len(set(events)) == 1


def test_an_answer_made_across_an_admin_write_is_not_kept() -> None:
    from mockserver.edge.exchange import Copy, Exchange
    from mockserver.edge.repeats import Repeats
    from mockserver.spine.repeat import Promise

    ctx = create_app(Settings(backend="script", frozen_time=FROZEN)).state.ctx
    ctx.script.add(text="Kept.")
    repeats = Repeats(ctx)

    def made() -> tuple[Promise, Copy]:
        promise = Promise(versions=ctx.chain.versions(1), whole=True, created=int(ctx.clock.now()))
        copy = Copy()
        copy.status, copy.headers, copy.bodies = 200, [(b"content-type", b"application/json")], [(b"{}", False)]
        return promise, copy

    async def nowhere(message: Any) -> None:
        return None

    began = repeats.generation
    repeats.keep(("a",), *made(), Exchange(nowhere, None), began)
    assert repeats.get(("a",)) is not None  # kept: nothing moved while it was made
    repeats.moved()  # an admin write while the next one is made
    repeats.keep(("b",), *made(), Exchange(nowhere, None), began)
    assert repeats.get(("a",)) is None and repeats.get(("b",)) is None
