"""A client that hangs up mid-stream stops its generation within a token or so."""

from __future__ import annotations

import time

import httpx

from mockserver.backends.reference import ReferenceBackend
from tests.live import Live


def test_disconnect_stops_generation(live: Live) -> None:
    assert live.app is not None
    backend = live.app.state.ctx.engine.backend
    assert isinstance(backend, ReferenceBackend)
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
