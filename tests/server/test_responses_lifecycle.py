"""The Responses lifecycle stepped on a virtual clock (a server with a queue time and a
token rate, moved by the admin API), and a SQLite store shared by two servers. (The status
table and the stores themselves: tests/unit/lifecycle/test_lifecycle.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.lifecycle.runs import TERMINAL
from tests.support.live import FROZEN, Borrowed, Live, serve_in_thread


@pytest.fixture(scope="module")
def paced(live: Live) -> Iterator[Live]:
    """Background responses wait 1 s queued and make 1 token per second of server time."""
    assert live.app is not None
    settings = Settings(frozen_time=FROZEN, responses_queue_time=1, responses_tokens_per_second=1)
    app = create_app(settings, backend=Borrowed(live.app.state.ctx.model))
    with serve_in_thread(app) as server:
        yield server


@pytest.fixture
def sdk(paced: Live) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=paced.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


def _advance(live: Live, seconds: float) -> None:
    assert httpx.post(live.url + "/__mockserver/clock", json={"advance": seconds}).status_code == 200


def _until(sdk: openai.OpenAI, response_id: str, done: Any) -> Any:
    for _ in range(5000):
        response = sdk.responses.retrieve(response_id)
        if done(response):
            return response
    raise AssertionError(f"{response_id} never got there")


def test_steps_through_queued_and_in_progress(sdk: openai.OpenAI, paced: Live) -> None:
    created = sdk.responses.create(model="m", input="Step me", background=True, max_output_tokens=16)
    assert sdk.responses.retrieve(created.id).status == "queued"  # the clock has not moved
    _advance(paced, 1)
    _until(sdk, created.id, lambda r: r.status == "in_progress")
    _advance(paced, 3)
    partial = _until(sdk, created.id, lambda r: r.output and r.output[0].content and r.output[0].content[0].text)
    assert partial.status == "in_progress"
    _advance(paced, 100)
    assert _until(sdk, created.id, lambda r: r.status in TERMINAL).output_text.startswith(partial.output_text)


def test_cancel_in_progress_stops_output(sdk: openai.OpenAI, paced: Live) -> None:
    created = sdk.responses.create(model="m", input="Cancel me", background=True, stream=True, max_output_tokens=32)
    _advance(paced, 4)
    seen: list[Any] = []
    for event in created:
        seen.append(event)
        if event.type == "response.output_text.delta":
            break
    response_id = seen[0].response.id
    cancelled = sdk.responses.cancel(response_id)
    assert cancelled.status == "cancelled"
    _advance(paced, 100)
    sdk.responses.create(model="m", input="something else", max_output_tokens=16)  # let the server go on
    after = sdk.responses.retrieve(response_id)
    assert after.status == "cancelled" and after.output_text == cancelled.output_text
    replay = list(sdk.responses.retrieve(response_id, stream=True))  # ends: no closing event
    assert all(e.type not in ("response.completed", "response.incomplete") for e in replay)
    assert sdk.responses.cancel(response_id).model_dump() == after.model_dump()  # unchanged


def test_resume_follows_live_events(sdk: openai.OpenAI, paced: Live) -> None:
    stream = sdk.responses.create(model="m", input="Follow me", background=True, stream=True, max_output_tokens=24)
    _advance(paced, 1 + 6)  # queued, then 6 tokens: events 0-4 and 6 deltas, through sequence 10
    first: list[Any] = []
    with stream:
        for event in stream:
            first.append(event)
            if event.sequence_number == 10:
                break
    response_id = first[0].response.id
    assert sdk.responses.retrieve(response_id).status == "in_progress"
    rest_stream = sdk.responses.retrieve(response_id, stream=True, starting_after=10)
    _advance(paced, 100)  # the run finishes while the resumed stream follows it
    rest = list(rest_stream)
    whole = list(sdk.responses.retrieve(response_id, stream=True))
    assert [e.model_dump() for e in first + rest] == [e.model_dump() for e in whole]
    assert rest[-1].type == "response.incomplete"


def test_sqlite_store_is_shared_between_servers(live: Live, tmp_path: Path) -> None:
    """Two servers (two stores over one file): created on one, finished, read and resumed on
    the other."""
    assert live.app is not None
    backend = Borrowed(live.app.state.ctx.model)
    settings = Settings(frozen_time=FROZEN, store=f"sqlite:{tmp_path / 'shared.db'}")
    with (
        serve_in_thread(create_app(settings, backend=backend)) as one,
        serve_in_thread(create_app(settings, backend=backend)) as two,
    ):
        a = openai.OpenAI(base_url=one.base_url, api_key="x", max_retries=0)
        b = openai.OpenAI(base_url=two.base_url, api_key="x", max_retries=0)
        events: list[Any] = list(a.responses.create(model="m", input="Shared", background=True, stream=True))
        response_id = events[0].response.id
        assert b.responses.retrieve(response_id).model_dump() == events[-1].response.model_dump()
        resumed = list(b.responses.retrieve(response_id, stream=True, starting_after=2))
        assert [e.model_dump() for e in resumed] == [e.model_dump() for e in events[3:]]
        b.responses.delete(response_id)
        with pytest.raises(openai.NotFoundError):
            a.responses.retrieve(response_id)
