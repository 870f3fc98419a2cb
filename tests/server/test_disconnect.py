"""A client that hangs up mid-stream stops its generation within a token or so."""

from __future__ import annotations

import time

import httpx
import pytest

from mockserver.backends.reference.backend import ReferenceBackend
from tests.support.live import Live


def _quiet(backend: ReferenceBackend, timeout: float = 30.0) -> None:
    """Wait until nothing else steps the model for a moment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = backend.steps
        time.sleep(0.3)
        if backend.steps == seen:
            return


def test_disconnect_stops_generation(live: Live) -> None:
    assert live.app is not None
    backend = live.app.state.ctx.model
    assert isinstance(backend, ReferenceBackend)
    _quiet(backend)  # background runs of earlier tests must not count as this stream's steps
    before = backend.steps
    # ignore_eos: forced long (3,000 tokens), so the hang-up, not a natural finish, ends it.
    body = {
        "model": "m",
        "prompt": "Tell a long story",
        "max_tokens": 3000,
        "stream": True,
        "temperature": 1.0,
        "ignore_eos": True,
    }
    with httpx.stream("POST", live.base_url + "/completions", json=body) as response:
        seen = 0
        for line in response.iter_lines():
            seen += line.startswith("data: {")
            if seen >= 5:
                break
    # The client closed the connection; give the server a moment to notice.
    time.sleep(0.5)
    settled = backend.steps
    time.sleep(0.5)
    assert backend.steps == settled, "generation went on after the client left"
    assert settled - before < 100  # stopped early, far from 3000 tokens
    assert not backend._contended()  # a cancelled step leaves no phantom work in the queue count
    assert httpx.get(live.url + "/health").status_code == 200


async def test_a_request_cancelled_while_it_waits_for_the_pool_leaves_no_count() -> None:
    """Regression: a client gone before its first pool task started left ``_queued`` counted
    for ever, so every later non-streamed request thought the pool was contended."""
    import asyncio
    import threading

    from mockserver.spine.request import GenerationRequest, Prompt, Sampling

    backend = ReferenceBackend(threads=1)
    try:
        await asyncio.wrap_future(backend.warm_up())
        release = threading.Event()
        blocker = backend._submit(release.wait)  # the only pool thread is busy
        request = GenerationRequest("completions", "m", (Prompt(text="Hi"),), 1, Sampling(max_tokens=4), 1, 64)
        waiting = asyncio.create_task(anext(aiter(backend.generate(request))))
        await asyncio.sleep(0.05)
        assert backend._queued == 1  # its first task waits behind the blocker
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        release.set()
        await asyncio.wrap_future(blocker)
        assert backend._queued == 0
        assert not backend._contended()
    finally:
        backend.close()


def _abandon(url: str, body: dict[str, object], after: float = 1.0) -> None:
    """Send ``body`` and hang up after ``after`` seconds without reading an answer."""
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url, json=body, timeout=httpx.Timeout(30.0, read=after))


def _stops(backend: ReferenceBackend, before: int, most: int) -> None:
    time.sleep(0.5)  # the server notices the closed connection
    settled = backend.steps
    time.sleep(0.5)
    assert backend.steps == settled, "generation went on after the client left"
    assert settled - before < most


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/completions", {"model": "m", "prompt": "Tell a long story", "max_tokens": 8000, "n": 4, "ignore_eos": True}),
        (
            "/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8000, "ignore_eos": True},
        ),
    ],
)
def test_a_non_streamed_request_stops_when_its_client_leaves(live: Live, path: str, body: dict[str, object]) -> None:
    """Nothing is written until a non-streamed answer is whole, so only a listener can tell
    the client left: it cancels the generation (a core stayed busy for minutes without it)."""
    assert live.app is not None
    backend = live.app.state.ctx.model
    assert isinstance(backend, ReferenceBackend)
    _quiet(backend)
    before = backend.steps
    _abandon(live.base_url + path, {**body, "temperature": 1.0}, after=0.5)
    _stops(backend, before, 6000)  # stopped early: far from the 8,000 steps of a whole answer
    entries = httpx.get(live.url + "/__mockserver/journal").json()["entries"]
    mine = [e for e in entries if e["path"] == "/v1" + path][-1]
    assert (mine["status"], mine["ended"]) == (499, "client_disconnect")
    assert not backend._contended()
    assert httpx.post(live.base_url + path, json={**body, "max_tokens": 2}).status_code == 200


def test_a_foreground_response_stops_and_is_stored_cancelled_when_its_client_leaves(live: Live) -> None:
    assert live.app is not None
    backend = live.app.state.ctx.model
    assert isinstance(backend, ReferenceBackend)
    _quiet(backend)
    before = backend.steps
    # Responses has no ignore_eos: a profile's extra field, so through extra_body's path, the top level.
    body = {
        "model": "m",
        "input": "Tell a long story",
        "max_output_tokens": 8000,
        "temperature": 1.0,
        "ignore_eos": True,
    }
    _abandon(live.base_url + "/responses", body, after=0.5)
    _stops(backend, before, 6000)  # stopped early: far from the 8,000 steps of a whole answer
    entries = httpx.get(live.url + "/__mockserver/journal").json()["entries"]
    mine = [e for e in entries if e["path"] == "/v1/responses"][-1]
    assert mine["ended"] == "client_disconnect"
    store = live.app.state.ctx.responses.store
    ours = [e.record for e in store._entries.values() if e.record.response.get("max_output_tokens") == 8000]
    assert ours and ours[-1].response["status"] == "cancelled"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("wait", ["latency.queue", "latency.ttft"])
def test_a_client_that_leaves_during_a_wait_gets_nothing_made(live: Live, wait: str, stream: bool) -> None:
    """A queue or TTFT delay is waited for before the first byte (streamed or not): a client
    that leaves during it is noticed there, the wait ends, and the model makes nothing for it."""
    assert live.app is not None
    backend = live.app.state.ctx.model
    assert isinstance(backend, ReferenceBackend)
    _quiet(backend)
    before = backend.steps
    content = f"Hi, leaving during {wait}, stream={stream}"
    # ignore_eos: a long answer (8,000 tokens), so a model still making it after the hang-up would show.
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 8000,
        "ignore_eos": True,
        "stream": stream,
    }
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            live.base_url + "/chat/completions",
            json=body,
            headers={"x-mockserver-fault": f"{wait},ms=600000"},  # ten minutes: only a hang-up ends it
            timeout=httpx.Timeout(30.0, read=0.3),
        )
    entries: list[dict[str, object]] = []
    for _ in range(100):  # the server notices the closed connection within a moment
        entries = httpx.get(live.url + "/__mockserver/journal").json()["entries"]
        mine = [e for e in entries if isinstance(e["body"], dict) and e["body"].get("messages") == body["messages"]]
        if mine and mine[-1]["ended"] != "pending":
            break
        time.sleep(0.05)
    assert (mine[-1]["status"], mine[-1]["ended"]) == (499, "client_disconnect")
    assert mine[-1]["duration"] < 10  # type: ignore[operator]
    assert time.monotonic() - started < 10
    # The model opens the answer before the delay is waited (its first event is the request's
    # 400s and its prefill; a non-streamed answer is then made ahead): the hang-up stops it there,
    # far from the 8,000 tokens of a whole answer.
    _stops(backend, before, 6000)
    assert httpx.get(live.url + "/health").status_code == 200
