"""A client that hangs up mid-stream stops its generation within a token or so."""

from __future__ import annotations

import time

import httpx

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
    body = {"model": "m", "prompt": "Tell a long story", "max_tokens": 3000, "stream": True, "temperature": 1.0}
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
