"""A disconnect storm: clients that hang up mid-stream — politely (FIN) or not (RST), before
the answer, after its headers, after a few events, while it stalls — leave nothing behind: no
task or thread more than before, no journal entry still pending, no stored response left
``in_progress``, no model work queued; and the server answers as fast as before.

The server runs in a thread of this process, so its event loop's tasks can be counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from mockserver.app import create_app
from mockserver.backends.reference.backend import ReferenceBackend
from mockserver.config import Settings
from mockserver.state.records import Query
from tests.reliability.conftest import Budget
from tests.reliability.harness import (
    InThread,
    Json,
    described,
    errors_logged,
    latencies,
    p50,
    proc_status,
    thread_server,
)

MODEL = "gpt-4o-mini"
SESSION = "storm"
SLOW = "latency.itl=5"  # 5 ms between tokens: a stream lasts long enough to be left
PROBE: Json = {"model": MODEL, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4, "seed": 3}


@dataclass(frozen=True)
class Kind:
    path: str
    body: Json
    fault: str = SLOW
    most: int = 1000  # events there are to read before the server stops sending (a stall)


def _chat(**extra: Any) -> Json:
    return {"model": MODEL, "messages": [{"role": "user", "content": "Tell a long story."}], "max_tokens": 400} | extra


KINDS = (
    Kind("/v1/chat/completions", _chat(stream=True, stream_options={"include_usage": True})),
    Kind("/v1/chat/completions", _chat(stream=True, n=2, logprobs=True, top_logprobs=3)),
    Kind("/v1/chat/completions", _chat(stream=True, store=True)),
    Kind("/v1/completions", {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 400, "stream": True}),
    Kind("/v1/responses", {"model": MODEL, "input": "Tell a long story.", "max_output_tokens": 400, "stream": True}),
    Kind(
        "/v1/responses",
        {"model": MODEL, "input": "Tell a story.", "max_output_tokens": 400, "stream": True, "store": False},
    ),
    # Leaving a background stream does not stop the run: it completes on its own.
    Kind(
        "/v1/responses",
        {"model": MODEL, "input": "A story.", "max_output_tokens": 32, "stream": True, "background": True},
        "",
    ),
    # Gone while the stream stalls (for ever, or with keep-alive comments).
    Kind("/v1/chat/completions", _chat(stream=True), "stream.stall_after=2", most=2),
    Kind(
        "/v1/responses", {"model": MODEL, "input": "Hi", "stream": True}, "stream.stall_after=3,keepalive=0.05", most=3
    ),
)


@dataclass
class Left:
    """What one client saw before it hung up."""

    events: int = 0
    response_id: str | None = None
    completed: bool = False


async def _leave(port: int, kind: Kind, after: int, reset: bool, number: int) -> Left:
    """Send the request, read until ``after`` events (-1: nothing at all, 0: the headers),
    then close the socket — with an RST when ``reset``."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
    left = Left()
    after = min(after, kind.most)
    try:
        body = {**kind.body, "seed": number}  # every client its own answer
        payload = json.dumps(body).encode()
        head = (
            f"POST {kind.path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(payload)}\r\nx-mockserver-session: {SESSION}\r\n"
            + (f"x-mockserver-fault: {kind.fault}\r\n" if kind.fault else "")
            + "\r\n"
        )
        writer.write(head.encode() + payload)
        await writer.drain()
        seen = b""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while after >= 0:
            chunk = await asyncio.wait_for(reader.read(65536), max(0.1, deadline - loop.time()))
            if not chunk:
                break
            seen += chunk
            if b"\r\n\r\n" in seen and seen.count(b"\ndata: ") >= after:
                break
            if b"data: [DONE]" in seen or b"response.completed" in seen:
                break  # it ended before the client meant to leave
        left.events = seen.count(b"\ndata: ")
        left.completed = b"data: [DONE]" in seen or b"response.completed" in seen
        marker = seen.find(b'"id":"resp_')
        if marker >= 0:
            left.response_id = seen[marker + 6 : seen.index(b'"', marker + 6)].decode()
    finally:
        if reset:  # SO_LINGER 0: close sends an RST, not a FIN
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.close()
        with contextlib.suppress(TimeoutError, OSError):
            await asyncio.wait_for(writer.wait_closed(), 5)
    return left


async def _storm(port: int, clients: int, concurrency: int) -> list[Left]:
    rng = random.Random(1000)
    plan = [(KINDS[i % len(KINDS)], rng.choice((-1, 0, 1, 2, 3, 5, 8)), rng.random() < 0.5) for i in range(clients)]
    gate = asyncio.Semaphore(concurrency)

    async def one(number: int) -> Left:
        kind, after, reset = plan[number]
        async with gate:
            return await _leave(port, kind, after, reset, number)

    return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(clients))), 600)


def _settle(server: InThread, baseline: int | None = None, timeout: float = 60.0) -> list[asyncio.Task[Any]]:
    """The server's tasks, once they are back to ``baseline`` — or, without one, once their
    count holds still for a second — or when the timeout has passed."""
    deadline = time.monotonic() + timeout
    counts: list[int] = []
    while True:
        tasks = server.tasks()
        counts.append(len(tasks))
        settled = len(tasks) <= baseline if baseline is not None else len(counts) >= 5 and len(set(counts[-5:])) == 1
        if settled or time.monotonic() > deadline:
            return tasks
        time.sleep(0.2)


def _idle(backend: ReferenceBackend, timeout: float = 60.0) -> None:
    """Until no model step has run for a moment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = backend.steps
        time.sleep(0.3)
        if backend.steps == seen and backend._queued == 0:
            return


def test_a_disconnect_storm_leaks_nothing(budget: Budget, figures: dict[str, Any]) -> None:
    app = create_app(Settings(frozen_time=1_700_000_000.0))
    backend = app.state.ctx.model
    assert isinstance(backend, ReferenceBackend)
    with thread_server(app) as server:
        port = int(server.live.url.rsplit(":", 1)[1])
        probe_url = server.live.base_url + "/chat/completions"
        # Warm up every path the storm takes (pools and lazily made threads start now).
        with httpx.Client(timeout=60) as client:
            for kind in KINDS:
                if "stall" in kind.fault:
                    continue
                limit = "max_output_tokens" if kind.path == "/v1/responses" else "max_tokens"
                warm = client.post(server.live.url + kind.path, json={**kind.body, limit: 16, "stream": False})
                assert warm.status_code in (200, 400), warm.text
        asyncio.run(_storm(port, 2 * len(KINDS), len(KINDS)))  # and each way of leaving, once
        _idle(backend)
        tasks_before = _settle(server, timeout=20)
        threads_before = threading.active_count()
        os_threads_before = proc_status(os.getpid(), "Threads")  # torch's and uvloop's too
        before = latencies(probe_url, PROBE, 15)

        started = time.monotonic()
        with errors_logged() as errors:
            left = asyncio.run(_storm(port, budget.storm_clients, budget.storm_concurrency))
            storm_seconds = time.monotonic() - started

        _idle(backend)
        tasks_after = _settle(server, len(tasks_before))
        threads_after = threading.active_count()
        os_threads_after = proc_status(os.getpid(), "Threads")
        after = latencies(probe_url, PROBE, 15)
        journal = app.state.ctx.chaos.journal.entries(SESSION)
        pending = [e for e in journal if e.ended == "pending"]
        # Every stored response, whether or not its client saw its id: none left running.
        stored = server.wait(app.state.ctx.responses.store.find(Query(kind="response", limit=10**6))).records
        unfinished = {r.id: r.status for r in stored if r.status in ("queued", "in_progress")}
        assert httpx.get(server.live.url + "/health", timeout=5).status_code == 200

    figures.update(
        clients=budget.storm_clients,
        concurrency=budget.storm_concurrency,
        **{"storm seconds": round(storm_seconds, 1)},
        **{"left after events (mean)": round(sum(x.events for x in left) / len(left), 1)},
        **{"tasks before / after": f"{len(tasks_before)} / {len(tasks_after)}"},
        **{"threads before / after": f"{threads_before} / {threads_after}"},
        **{"OS threads before / after": f"{os_threads_before} / {os_threads_after}"},
        **{"probe p50 before / after (ms)": f"{p50(before) * 1000:.1f} / {p50(after) * 1000:.1f}"},
        **{"journal entries / still pending": f"{len(journal)} / {len(pending)}"},
        **{"stored responses / still queued or in_progress": f"{len(stored)} / {len(unfinished)}"},
    )
    assert not errors, described(errors)
    assert len(tasks_after) <= len(tasks_before), [repr(t) for t in tasks_after]
    assert threads_after <= threads_before, [t.name for t in threading.enumerate()]
    assert os_threads_after <= os_threads_before
    assert not pending, pending[:5]
    assert not unfinished, unfinished
    assert backend._queued == 0
    assert p50(after) <= 3 * p50(before) + 0.05, (before, after)
