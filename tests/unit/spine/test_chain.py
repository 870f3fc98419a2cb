"""The backend chain and the engine with tiny fake backends: who answers, what declines, when
the request is built (never for an idle backend or a recorder, at most once otherwise), and
the wrappers every answer gets (content faults, stalls that stall)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mockserver.engine import Engine
from mockserver.errors import APIError, InvalidRequest, NotFound
from mockserver.faults.catalogue import parse
from mockserver.faults.content import REFUSAL
from mockserver.faults.latency import Timeline, paced
from mockserver.spine.backend import Answering, Ask, BackendBase, Chain, Declined, Role, Unbuilt
from mockserver.spine.events import (
    Answered,
    Event,
    Finished,
    RecordedEnd,
    RecordedFrame,
    RecordedHead,
    Started,
    TextDelta,
    Usage,
)
from mockserver.spine.request import GenerationRequest, Prompt, Sampling, Source

SOURCE = Source(surface="chat", target="/v1/chat/completions", body=b'{"model":"m"}')
REQUEST = GenerationRequest(
    endpoint="chat",
    model="m",
    prompts=(Prompt(text="hi"),),
    n=1,
    sampling=Sampling(),
    seed=7,
    context_window=64,
    surface=SOURCE.surface,
)
SAID: tuple[Event, ...] = (
    Started(0, 3),
    TextDelta(0, "one"),
    TextDelta(0, " two"),
    TextDelta(0, " three"),
    Finished(0, "stop"),
    Usage(3, 3),
)
RECORDED: tuple[Event, ...] = (
    RecordedHead(200, ((b"content-type", b"application/json"),), stream=False),
    RecordedFrame(b'{"recorded":true}'),
    RecordedEnd("done"),
)


class Says(BackendBase):
    """Answers every request with ``events``; remembers the requests it was given."""

    def __init__(self, events: tuple[Event, ...] = SAID) -> None:
        self.events = events
        self.asked: list[GenerationRequest] = []
        self.closed = False

    async def answer(self, ask: Ask) -> AsyncIterator[Event]:
        request = ask.request
        self.asked.append(request)
        try:
            for event in self.events:
                yield event
        finally:
            self.closed = True


class Declines(BackendBase):
    """Declines every request (with ``error``, if given), after reading it."""

    role: Role = "script"

    def __init__(self, error: APIError | None = None) -> None:
        self.error = error
        self.asked: list[GenerationRequest] = []

    async def answer(self, ask: Ask) -> AsyncIterator[Event]:
        self.asked.append(ask.request)
        raise Declined(self.error)
        yield  # an async generator, as backends are


class Idle(BackendBase):
    """A backend with nothing to answer with (scripted answers with no rule)."""

    role: Role = "script"

    @property
    def idle(self) -> bool:
        return True

    async def answer(self, ask: Ask) -> AsyncIterator[Event]:
        raise AssertionError("an idle backend is never asked")
        yield


class Recorder(BackendBase):
    """Answers by the request as sent (replay, record): reads the ask's source, never builds it."""

    role: Role = "recording"

    def __init__(self, declines: APIError | bool | None = False) -> None:
        self.events = RECORDED
        self.declines = declines
        self.sources: list[Source] = []

    async def answer(self, ask: Ask) -> AsyncIterator[Event]:
        source = ask.source
        self.sources.append(source)
        if self.declines is not False:
            raise Declined(self.declines if isinstance(self.declines, APIError) else None)
        for event in self.events:
            yield event


class Counted:
    """An :class:`Ask` its caller builds (counted) where the chain stops for it, as the handler does."""

    def __init__(self, request: GenerationRequest = REQUEST) -> None:
        self.builds = 0
        self.request = request
        self.ask = Ask(SOURCE)

    async def start(self, chain: Chain) -> Answering:
        at = 0
        while True:
            started = await chain.start(self.ask, at)
            if not isinstance(started, Unbuilt):
                return started
            self.builds += 1
            self.ask.built, at = self.request, started.at


async def _rest(stream: AsyncIterator[Event]) -> list[Event]:
    return [event async for event in stream]


def _chain(*links: tuple[str, Any]) -> Chain:
    return Chain(list(links))


# ---- the chain --------------------------------------------------------------------------


async def test_the_first_backend_that_does_not_decline_answers() -> None:
    first, second, third = Declines(), Says(), Says((TextDelta(0, "never"),))
    counted = Counted()
    name, event, stream = await counted.start(_chain(("a", first), ("b", second), ("c", third)))
    assert (name, event) == ("b", SAID[0])
    assert await _rest(stream) == list(SAID[1:])
    assert first.asked == [REQUEST] and second.asked == [REQUEST] and third.asked == []


async def test_generate_opens_with_who_answered() -> None:
    chain = _chain(("script", Declines()), ("reference", Says()))
    events = [event async for event in chain.generate(REQUEST)]
    assert events == [Answered("reference"), *SAID]


async def test_an_empty_answer_is_an_answer() -> None:
    chain = _chain(("empty", Says(())), ("later", Says()))
    name, event, stream = await Counted().start(chain)
    assert (name, event) == ("empty", None)
    assert await _rest(stream) == []
    assert [event async for event in chain.generate(REQUEST)] == [Answered("empty")]


async def test_when_all_decline_the_first_refusal_with_an_error_is_raised() -> None:
    miss = NotFound("closest recording differs in: max_tokens", code="cassette_miss")
    later = InvalidRequest("a later refusal")
    chain = _chain(("script", Declines()), ("replay", Recorder(declines=miss)), ("other", Declines(later)))
    with pytest.raises(NotFound) as raised:
        await Counted().start(chain)
    assert raised.value is miss


async def test_when_all_decline_without_an_error_the_answer_is_404_no_answer() -> None:
    chain = _chain(("script", Declines()), ("replay", Recorder(declines=None)))
    with pytest.raises(NotFound) as raised:
        await Counted().start(chain)
    error = raised.value
    assert (error.status, error.code) == (404, "no_answer")
    assert error.message == "No backend of the chain (script, replay) answers this request."
    assert error.headers == {"x-should-retry": "false"}


async def test_an_idle_backend_is_passed_by_without_building_the_request() -> None:
    recorder = Recorder()
    counted = Counted()
    name, event, stream = await counted.start(_chain(("script", Idle()), ("replay", recorder)))
    assert (name, event) == ("replay", RECORDED[0])
    assert await _rest(stream) == list(RECORDED[1:])
    assert counted.builds == 0
    assert recorder.sources == [SOURCE]


async def test_a_chain_of_idle_backends_answers_no_answer_without_building() -> None:
    counted = Counted()
    with pytest.raises(NotFound) as raised:
        await counted.start(_chain(("script", Idle())))
    assert raised.value.code == "no_answer"
    assert counted.builds == 0


async def test_a_recorder_answers_without_the_request_being_built() -> None:
    recorder, model = Recorder(), Says()
    counted = Counted()
    name, _, _ = await counted.start(_chain(("replay", recorder), ("reference", model)))
    assert name == "replay"
    assert counted.builds == 0 and counted.ask.built is None
    assert model.asked == []


async def test_a_declining_recorder_then_a_backend_that_needs_the_request_builds_it_once() -> None:
    counted = Counted()
    model = Says()
    chain = _chain(("replay", Recorder(declines=True)), ("reference", model))
    name, _, _ = await counted.start(chain)
    assert name == "reference"
    assert counted.builds == 1 and model.asked == [REQUEST]


async def test_the_request_is_built_at_most_once_for_two_backends_that_need_it() -> None:
    counted = Counted()
    first, second = Declines(), Says()
    name, _, _ = await counted.start(_chain(("script", first), ("reference", second)))
    assert name == "reference"
    assert counted.builds == 1
    assert first.asked[0] is second.asked[0] is REQUEST


async def test_an_ask_of_a_built_request_never_builds() -> None:
    ask = Ask.of(REQUEST, SOURCE)
    assert ask.built is REQUEST and ask.source is SOURCE
    assert ask.request is REQUEST


async def test_closing_the_chains_answer_closes_the_backends_stream() -> None:
    model = Says()
    events = _chain(("reference", model)).generate(REQUEST)
    assert await anext(events) == Answered("reference")
    assert await anext(events) == SAID[0]
    await events.aclose()  # type: ignore[attr-defined]
    assert model.closed


def test_a_chain_has_names_and_needs_a_backend() -> None:
    model = Says()
    chain = _chain(("script", Idle()), ("reference", model))
    assert chain.names == ("script", "reference")
    assert chain.get("reference") is model and chain.get("replay") is None
    with pytest.raises(ValueError, match="at least one backend"):
        Chain([])


# ---- the engine ---------------------------------------------------------------------------


async def test_the_engine_opens_with_answered_and_folds_who_answered() -> None:
    engine = Engine(_chain(("script", Idle()), ("reference", Says())))
    events = await engine.events(Ask.of(REQUEST, SOURCE))
    assert [event async for event in events] == [Answered("reference"), *SAID]
    result = await engine.complete(REQUEST)
    assert result.answered_by == "reference"
    assert result.choices[0].text == "one two three"


async def test_content_faults_break_generated_answers_and_leave_recordings_alone() -> None:
    refusal = parse("content.refusal")
    generated = await Engine(_chain(("script", Says()))).complete(REQUEST, refusal)
    assert generated.choices[0].text == "" and generated.choices[0].refusal == REFUSAL
    engine = Engine(_chain(("replay", Recorder())))
    events = await engine.events(Counted().ask, refusal)
    assert [event async for event in events] == [Answered("replay"), *RECORDED]


async def test_a_paced_recording_is_paced_by_its_source_without_building_the_request() -> None:
    counted = Counted()
    engine = Engine(_chain(("replay", Recorder())), Timeline.parse("ttft=1"))
    name, first, stream = await engine.open(counted.ask)
    assert (name, first) == ("replay", RECORDED[0])
    assert await _rest(stream) == list(RECORDED[1:])
    assert counted.builds == 0


def test_a_timeline_of_stalls_alone_is_not_idle() -> None:
    assert Timeline.parse("").idle
    assert not Timeline.parse("stall_p=1; stall=fixed:1000").idle
    assert Timeline.parse("stall_p=1").idle  # no stall to add
    assert Timeline.parse("stall=fixed:1000").idle  # never drawn


def test_stalls_sleep_before_every_token_but_the_first() -> None:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def events() -> AsyncIterator[Event]:
        for event in SAID:
            yield event

    async def run() -> list[Event]:
        timeline = Timeline.parse("stall_p=1; stall=fixed:1000")
        return [event async for event in paced(events(), timeline, random.Random(0), 1.0, sleep)]

    assert asyncio.run(run()) == list(SAID)
    assert sleeps == [1.0, 1.0]  # " two" and " three"; the first token has no stall


async def test_the_engine_paces_a_timeline_of_stalls_alone() -> None:
    engine = Engine(_chain(("reference", Says())), Timeline.parse("stall_p=1; stall=fixed:60"))
    started = time.perf_counter()
    result = await engine.complete(REQUEST)
    assert time.perf_counter() - started >= 0.12  # two stalls of 60 ms
    assert result.choices[0].text == "one two three"
