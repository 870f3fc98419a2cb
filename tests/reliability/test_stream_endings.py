"""Regressions (found by the disconnect storm):

* A stored foreground Responses stream that a stream fault ended (``stream.cut_after``,
  ``stream.reset_after``, ``stream.error_at``), or whose client left during a
  ``stream.stall_after``, stayed ``in_progress`` until a garbage collection happened to close
  its generator: Starlette stops iterating a body whose ``send`` raised but does not close it.
  The garbage collector is off here, so only an explicit close can write it ``cancelled``.
* ``stream.reset_after`` on a connection already closed raised ``ValueError`` (uvloop's
  socket of a closed transport has no file descriptor): an "unhandled error" in the log.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.http.link import reset
from tests.reliability.harness import thread_server
from tests.support.live import Live

BODY = {"model": "gpt-4o-mini", "input": "Tell a story.", "max_output_tokens": 64, "stream": True}


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    with thread_server(create_app(Settings(frozen_time=1_700_000_000.0))) as running:
        yield running.live


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _status_settles(server: Live, response_id: str, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        status = str(httpx.get(f"{server.base_url}/responses/{response_id}", timeout=10).json()["status"])
        if status != "in_progress" or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def _first_id(lines: Iterator[str]) -> str:
    for line in lines:
        if line.startswith("data: ") and '"resp_' in line:
            start = line.index('"id":"resp_') + 6
            return line[start : line.index('"', start)]
    raise AssertionError("no response id in the stream")


@pytest.mark.parametrize("fault", ["stream.cut_after=3", "stream.reset_after=3", "stream.error_at=3"])
def test_a_stored_stream_a_fault_ended_is_cancelled_at_once(server: Live, no_gc: None, fault: str) -> None:
    headers = {"x-mockserver-fault": fault}
    try:
        with httpx.stream("POST", server.base_url + "/responses", json=BODY, headers=headers, timeout=30) as response:
            lines = response.iter_lines()
            response_id = _first_id(lines)
            for _ in lines:  # to the end the fault makes
                pass
    except httpx.TransportError:
        pass  # reset_after: the connection is reset, as asked
    assert _status_settles(server, response_id) == "cancelled"


def test_a_stored_stream_left_during_a_stall_is_cancelled_at_once(server: Live, no_gc: None) -> None:
    headers = {"x-mockserver-fault": "stream.stall_after=2,keepalive=0.05"}
    with httpx.stream("POST", server.base_url + "/responses", json=BODY, headers=headers, timeout=30) as response:
        response_id = _first_id(response.iter_lines())
    # The client hung up while the stream stalls; the keep-alive comment's send finds it gone.
    assert _status_settles(server, response_id) == "cancelled"


class _ClosedTransport:
    """What uvloop hands back once the connection is closed: a socket with no descriptor."""

    aborted = False

    def get_extra_info(self, name: str) -> Any:
        class Gone:
            def setsockopt(self, *args: Any) -> None:
                raise ValueError("negative file descriptor")

        return Gone() if name == "socket" else None

    def abort(self) -> None:
        self.aborted = True


def test_resetting_a_closed_connection_does_not_raise() -> None:
    transport = _ClosedTransport()
    reset(transport)
    assert transport.aborted
