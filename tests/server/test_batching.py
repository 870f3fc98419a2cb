"""Batched decoding never changes an answer: the same seeded requests give the same bytes
served one at a time on the single-row path and all at once through the batch scheduler.

The requests mix both generation endpoints, prompt lengths from a word to past the model's
attention window, ``n``, ``best_of``, logprobs and ``echo``, stop strings, the penalties,
Mirostat, ``min_p``/``top_k``/``top_p``, greedy decoding, ``logit_bias`` and tools. Each is
answered first by a backend with ``max_batch=0`` (every request alone, today's path), one
request at a time, and then by a batching backend at concurrency 16 and 64, streamed and not.

The issue's 200 requests by default (~20 s for the three modes on two busy cores).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx
import pytest

from mockserver.app import create_app
from mockserver.backends.reference import scheduler as scheduler_module
from mockserver.backends.reference.backend import ReferenceBackend
from mockserver.backends.reference.scheduler import HOLD, Scheduler, Ticket
from mockserver.config import Settings
from mockserver.spine.backend import aclose
from mockserver.spine.events import Event, Usage
from mockserver.spine.request import GenerationRequest, Prompt, Sampling
from tests.support.live import FROZEN

COUNT = 200

SENTENCE = (
    "the quiet river ran past an old mill where a baker sold bread every morning to travellers "
    "who came from the hills with stories about storms trains letters and markets far away"
)
WORDS = tuple(SENTENCE.split(" "))

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]


def _text(rng: random.Random) -> str:
    size = rng.choice((1, 3, 8, 20, 60, 160, 320))  # 320 words run past the 256-token window
    return " ".join(rng.choice(WORDS) for _ in range(size))


def _sampling(rng: random.Random) -> dict[str, Any]:
    """One of the processor mixes, each a different path through the sampler."""
    kind = rng.randrange(8)
    if kind == 0:
        return {"temperature": 0}
    if kind == 1:
        return {"temperature": 1.0, "top_p": 0.9}
    if kind == 2:
        return {"temperature": 0.8, "presence_penalty": 0.5, "frequency_penalty": 0.7}
    if kind == 3:
        return {"temperature": 1.0, "repetition_penalty": 1.3, "top_k": 40}
    if kind == 4:
        return {"temperature": 1.0, "mirostat_target": 3.0, "mirostat_lr": 0.2}
    if kind == 5:
        return {"temperature": 1.2, "min_p": 0.05, "logit_bias": {"17": 5, "42": -100}}
    if kind == 6:
        return {"temperature": 0.7, "min_tokens": 1, "top_k": 10}
    return {"temperature": 1.0}


def requests(count: int) -> list[tuple[str, dict[str, Any]]]:
    """``count`` seeded requests, the same on every run."""
    rng = random.Random(18)
    made: list[tuple[str, dict[str, Any]]] = []
    for i in range(count):
        body: dict[str, Any] = {"seed": i, "max_tokens": rng.choice((1, 6, 12, 24)), **_sampling(rng)}
        if rng.random() < 0.3:
            body["stop"] = rng.sample(["\n", " the", ".", "er", "xyz"], 2)
        n = rng.choice((1, 1, 1, 2, 3))
        if n > 1:
            body["n"] = n
        if rng.random() < 0.5:
            body |= {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": _text(rng)}]}
            if rng.random() < 0.4:
                body |= {"logprobs": True, "top_logprobs": rng.choice((0, 2, 5))}
            if rng.random() < 0.2:
                body |= {"tools": TOOLS, "tool_choice": rng.choice(("auto", "required"))}
            made.append(("/v1/chat/completions", body))
        else:
            body |= {"model": "m", "prompt": _text(rng)}
            if rng.random() < 0.4:
                body["logprobs"] = rng.choice((0, 1, 3))
                if rng.random() < 0.3:
                    body["echo"] = True
            if rng.random() < 0.15:
                body["best_of"] = body.get("n", 1) + 1
            made.append(("/v1/completions", body))
    return made


def _streamable(body: dict[str, Any]) -> bool:
    return "best_of" not in body  # best_of with stream is a 400, rightly


Answers = dict[tuple[int, bool], bytes]


async def _serve(
    client: httpx.AsyncClient, work: list[tuple[str, dict[str, Any]]], concurrency: int, stream: bool
) -> Answers:
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        async with gate:
            sent = {**body, "stream": True, "stream_options": {"include_usage": True}} if stream else body
            response = await client.post(path, json=sent)
            assert response.status_code == 200, (i, response.text[:500])
            return i, response.content

    todo = [(i, p, b) for i, (p, b) in enumerate(work) if not stream or _streamable(b)]
    done = await asyncio.gather(*(one(i, p, b) for i, p, b in todo))
    return {(i, stream): raw for i, raw in done}


Work = list[tuple[str, dict[str, Any]]]


async def _answers(backend: ReferenceBackend, work: Work, concurrency: int, stream: bool) -> Answers:
    app = create_app(Settings(frozen_time=FROZEN), backend=backend)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=300) as c:
        return await _serve(c, work, concurrency, stream)


@pytest.fixture(scope="module")
def alone() -> tuple[Work, Answers]:
    """Every request served alone, one at a time, on the single-row path."""
    work = requests(COUNT)
    backend = ReferenceBackend(threads=1, max_batch=0)
    try:
        whole = asyncio.run(_answers(backend, work, 1, False))
        streamed = asyncio.run(_answers(backend, work, 1, True))
    finally:
        backend.close()
    assert backend._scheduler is None  # the single-row path never made one
    assert len({raw for raw in whole.values()}) == len(whole)  # every answer its own
    return work, whole | streamed


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_batched_answers_are_byte_identical_to_answers_alone(alone: tuple[Work, Answers], stream: bool) -> None:
    work, expected = alone
    wanted = {k: v for k, v in expected.items() if k[1] == stream}
    backend = ReferenceBackend(threads=1, max_batch=64)
    try:
        for concurrency in (16, 64):
            got = asyncio.run(_answers(backend, work, concurrency, stream))
            assert got.keys() == wanted.keys()
            differ = [work[i] for (i, _), raw in got.items() if raw != wanted[(i, stream)]]
            assert not differ, f"{len(differ)} answers changed at concurrency {concurrency}: {differ[:3]}"
        scheduler = backend._scheduler
        assert scheduler is not None
        # Rows of several requests really shared steps, at least as many as make a plain
        # batched product round differently (B ≥ 4; test_batch_invariance.py).
        assert scheduler.widest >= 4, scheduler.widest
    finally:
        backend.close()


def _request(n: int = 1, max_tokens: int = 3000, stream: bool = True) -> GenerationRequest:
    sampling = Sampling(max_tokens=max_tokens, temperature=1.0, ignore_eos=True)
    return GenerationRequest(
        "completions", "m", (Prompt(text="Tell a long story"),), n, sampling, 7, 8192, stream=stream
    )


def _settled(scheduler: Scheduler, done: Callable[[], bool], polls: int = 20_000) -> bool:
    """Polls ``done`` while the scheduler works (a bound in turns, not in time)."""
    for _ in range(polls):
        if done():
            return True
        with scheduler._cond:
            scheduler._cond.wait(0.001)
    return done()


async def test_a_client_that_leaves_frees_its_rows_at_the_next_turn() -> None:
    backend = ReferenceBackend(threads=1, max_batch=8)
    try:
        staying = backend.generate(_request(n=2))
        leaving = backend.generate(_request(n=3))
        for stream in (staying, leaving):
            for _ in range(4):
                await anext(stream)
        scheduler = backend._scheduler
        assert scheduler is not None
        assert scheduler.slots.in_use() == 5  # both requests' choices hold a row
        await aclose(leaving)  # what the server does when a client hangs up
        assert _settled(scheduler, lambda: scheduler.slots.in_use() == 2)
        assert len(scheduler.active) == 1
        await anext(staying)  # the other request goes on
        await aclose(staying)
        assert _settled(scheduler, lambda: scheduler.slots.in_use() == 0 and not scheduler.active)
    finally:
        backend.close()


async def test_a_stream_that_is_not_read_holds_its_tokens_and_gets_them_in_one_delivery(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a stream's last delivery is still being handed on (a busy event loop, a slow
    client), its next tokens wait, up to HOLD events, and then it sits out; once the delivery
    is handed on, the waiting events go in one delivery."""
    sizes: list[int] = []
    real = scheduler_module.deliver

    def counting(out: list[tuple[Ticket, Any]]) -> None:
        sizes.extend(len(item[0]) for _, item in out if not isinstance(item, BaseException))
        real(out)

    monkeypatch.setattr(scheduler_module, "deliver", counting)
    backend = ReferenceBackend(threads=1, max_batch=8)
    try:
        stream = backend.generate(_request(n=1))
        await anext(stream)  # the first delivery is being handed on: the generator is inside it
        scheduler = backend._scheduler
        assert scheduler is not None
        ticket = scheduler.active[0]
        assert _settled(scheduler, lambda: len(ticket.held) >= HOLD)  # meanwhile the tokens wait
        steps = ticket.decoding.steps
        assert not _settled(scheduler, lambda: ticket.decoding.steps > steps, polls=200)  # and it sits out
        assert ticket.unread == 1 and ticket.inbox.qsize() == 0 and len(sizes) == 1
        for _ in range(HOLD):  # the rest of the first delivery, then the next one
            await anext(stream)
        assert len(sizes) >= 2 and sizes[1] >= HOLD  # everything that waited, in one delivery
        await aclose(stream)
    finally:
        backend.close()


async def test_the_batch_holds_at_most_max_batch_rows_and_admits_in_arrival_order() -> None:
    backend = ReferenceBackend(threads=1, max_batch=4)
    try:
        first = [e async for e in backend.generate(_request(n=1, max_tokens=2))]  # model loaded
        assert first
        scheduler = backend._scheduler
        assert scheduler is not None
        admitted: list[int] = []
        admit = scheduler._admit

        def spy(tickets: list[Ticket]) -> None:
            admitted.extend(t.decoding.request.seed for t in tickets)
            admit(tickets)

        scheduler._admit = spy  # type: ignore[method-assign]
        wide = replace(_request(n=6, max_tokens=8), seed=100)  # wider than the batch
        bodies = [replace(_request(n=3, max_tokens=8), seed=s) for s in range(101, 104)]

        async def run(request: GenerationRequest) -> list[Event]:
            return [e async for e in backend.generate(request)]

        # All at once: prefilled in this order by the one pool thread, so queued in this order.
        results = await asyncio.gather(*(run(request) for request in (wide, *bodies)))
        assert all(isinstance(r[-1], Usage) for r in results)
        assert scheduler.widest == 6  # the wide request ran alone, everything else ≤ 4 rows
        assert admitted == [100, 101, 102, 103]
    finally:
        backend.close()


async def test_a_failing_step_ends_the_requests_in_the_batch_and_the_next_ones_are_served() -> None:
    backend = ReferenceBackend(threads=1, max_batch=8)
    try:
        assert [e async for e in backend.generate(_request(max_tokens=2))]  # loaded, scheduler made
        scheduler = backend._scheduler
        assert scheduler is not None
        compute = scheduler._compute

        def broken() -> None:
            raise RuntimeError("the step failed")

        scheduler._compute = broken  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="the step failed"):
            [e async for e in backend.generate(_request(max_tokens=4))]
        scheduler._compute = compute  # type: ignore[method-assign]
        assert scheduler.slots.in_use() == 0 and not scheduler.active
        events = [e async for e in backend.generate(_request(max_tokens=4))]
        assert isinstance(events[-1], Usage) and events[-1].completion_tokens == 4
    finally:
        backend.close()


@pytest.mark.parametrize("max_batch", [0, 8])
def test_the_max_batch_setting_reaches_the_model(max_batch: int) -> None:
    app = create_app(Settings(max_batch=max_batch))
    model = app.state.ctx.model
    assert isinstance(model, ReferenceBackend)
    assert model.max_batch == max_batch
