"""The one handler behind every generation endpoint: chat, completions and Responses.

``body ─params.prepare→ schema → codec.to_generation → engine (the backend chain under the
faults) → the family's delivery``, all of it as the request's profile (its path prefix's, else
the server's) says. A family adds only its codec and how its answer is delivered: chat and
completions fold a body or stream chunks (:func:`deliver_completion`); Responses run through
the lifecycle and its store (:mod:`mockserver.routes.responses.endpoints`).

An answer from a recording — replayed, or proxied while recording — is the provider's own
bytes, whatever the family: its status, headers and body go out as they were
(:func:`recorded_response`), under the same stream faults and latency as any other answer.
The same recordings also answer the endpoints that generate nothing (:func:`replayable`), so
a whole recorded session replays.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from mockserver.backends import prompts
from mockserver.context import Options, ServerContext
from mockserver.engine import fold, folded
from mockserver.errors import APIError, InvalidRequest
from mockserver.faults.catalogue import Fault
from mockserver.faults.plan import applicable, note, planned
from mockserver.faults.stream import StreamFaults
from mockserver.gpt.tokenizer import Tokenizer
from mockserver.http.body import json_body
from mockserver.http.gone import ClientGone, unless_gone
from mockserver.http.link import Link
from mockserver.http.sse import Frame, Framing, Ready, event_stream, events_in
from mockserver.routes import chat_store, params
from mockserver.routes.codec import Call, Chunk, ChunkFrame, Codec
from mockserver.schemas.common import GenerationFields, StreamOptions, validated
from mockserver.spine import seeding
from mockserver.spine.backend import Answering, Ask, Played, Unbuilt, aclose
from mockserver.spine.events import Event, Finished, RecordedEnd, RecordedFrame, RecordedHead, Usage
from mockserver.spine.repeat import Promise
from mockserver.spine.request import Endpoint, GenerationRequest, Origin, Source, Surface
from mockserver.spine.result import Result
from mockserver.wire import headers as h
from mockserver.wire.json import Json, dumps
from mockserver.wire.scope import BODY_KEY, DEPLOYMENT, REPEAT_KEY, TALLY_KEY
from mockserver.wire.stream import StreamEnded

__all__ = [
    "Family",
    "Opened",
    "Prepared",
    "Reader",
    "abandoned",
    "answer_headers",
    "chained",
    "deliver_completion",
    "deliver_with",
    "handle",
    "ready_body",
    "ready_frames",
    "recorded_response",
    "replayable",
    "stream_faults",
]

BIG_BODY = 256 * 1024  # bytes: a body this big is checked for a prompt too long before it is hashed


class Reader(Protocol):
    """The wire-to-spine half of a codec (all a family needs to share the handler)."""

    @property
    def schema(self) -> type[GenerationFields]: ...

    @property
    def surface(self) -> Surface: ...

    @property
    def endpoint(self) -> Endpoint: ...

    @property
    def id_prefix(self) -> str: ...

    def to_generation(self, body: Any, profile: Any, options: Options, origin: Origin) -> GenerationRequest: ...


@dataclass(slots=True, eq=False)
class Prepared:
    """A request the handler has read: what the family's delivery works from. (This and
    :class:`Opened` are made per request and never changed: not frozen, as a frozen dataclass
    sets each field the slow way.)"""

    request: Request
    ctx: ServerContext
    call: Call
    data: Json  # the body as a JSON object (extra_body lifted)
    plan: tuple[Fault, ...]  # the faults decided at the edge
    options: Options  # what the codec read (Responses: with the conversation continued)
    read: _Read | None = None  # what an identical body was read as (remembered: see _read)


@dataclass(slots=True, eq=False)
class Opened:
    """The answer as it begins: who answers, its first event and the rest; or, for a background
    response only, the error it failed with (its run fails, in its record)."""

    by: str
    first: Event | None = None
    rest: AsyncIterator[Event] | None = None
    failure: APIError | None = None

    def events(self) -> AsyncIterator[Event]:
        """Its events (the first included); the failure, raised, for a failed one."""
        if self.failure is not None:
            raise self.failure
        assert self.rest is not None
        return chained(self.first, self.rest)


Deliver = Callable[[Prepared, Opened], Awaitable[Response]]
Prelude = Callable[[ServerContext, Any], Awaitable[Options]]


@dataclass(frozen=True, slots=True)
class Family:
    """An endpoint family: its codec, how its answer goes out, what it must read before its
    request can be built (Responses: the conversation continued), and which bodies must be
    read before anything answers them (a background response: its run is stored)."""

    codec: Reader
    deliver: Deliver
    prelude: Prelude | None = None
    eager: Callable[[Json], bool] | None = None


async def handle(request: Request, family: Family) -> Response:
    ctx: ServerContext = request.app.state.ctx
    codec = family.codec
    scope = request.scope
    raw, data = await json_body(request)
    plan = planned(scope)
    stream_options = data.get("stream_options")
    include_usage = isinstance(stream_options, dict) and stream_options.get("include_usage") is True
    source = source_of(scope, raw, codec.surface, data.get("stream") is True, include_usage)
    ask = Ask(source)
    prepared: Prepared | None = None
    eager = family.eager is not None and family.eager(data)
    if eager:
        prepared = await _read(request, ctx, family, data, source, plan)
        ask.built = prepared.call.gen
    try:
        # Opening waits for the first event: a queue or TTFT delay, a model's prefill. A client
        # that leaves meanwhile is noticed there and nothing more is made for it (an answer made
        # at once runs straight through: no listener).
        prepared, (by, first, stream) = await unless_gone(
            request.receive, _opened(request, ctx, family, data, plan, ask, prepared)
        )
    except ClientGone:
        return abandoned(scope)
    except APIError as exc:
        if not eager:
            raise
        assert prepared is not None  # read before the chain was asked
        return await family.deliver(prepared, Opened("reference", failure=exc))
    if ask.origin is not None:
        _journal_origin(scope, ask.origin)
    if ask.versions is not None:
        promise: Promise | None = scope.get(REPEAT_KEY)
        if promise is not None:
            promise.vouch(ask)
    if isinstance(first, RecordedHead):
        style = ctx.profile_of(scope).error_style
        return await recorded_response(scope, by, first, stream, plan, style, codec.surface == "responses")
    if prepared is None:  # answered by a backend that needed no request (with nothing): read it now
        prepared = await _read(request, ctx, family, data, ask.source, plan)
    return await family.deliver(prepared, Opened(by, first, stream))


async def _opened(
    request: Request,
    ctx: ServerContext,
    family: Family,
    data: Json,
    plan: tuple[Fault, ...],
    ask: Ask,
    prepared: Prepared | None,
) -> tuple[Prepared | None, Answering]:
    """The chain started on ``ask``; where it stops for the built request, the body is read
    (its 400s raise here) and the chain goes on from there. What was read comes back too."""
    at = 0
    while True:
        started = await ctx.engine.start(ask, plan, at)
        if not isinstance(started, Unbuilt):
            return prepared, started
        prepared = await _read(request, ctx, family, data, ask.source, plan)
        ask.built, at = prepared.call.gen, started.at


@dataclass(slots=True)
class _Read:
    """What a body was read as, for a request whose answer depends on nothing else (kept in
    :attr:`~mockserver.context.ServerContext.reads`); and the last answer it got, encoded."""

    data: Json
    body: GenerationFields
    gen: GenerationRequest
    id: str
    include_usage: bool
    service_tier: str | None
    answer: _Encoded | None = None


@dataclass(frozen=True, slots=True)
class _Encoded:
    """An answer as encoded (a body, or a stream's frames), and what it was encoded from: who answered,
    the events made at once (:class:`~mockserver.spine.backend.Played`, by identity: a backend
    hands out the same events for the same request) and the second it was created in."""

    by: str
    events: Sequence[Event]
    created: int
    body: bytes  # a whole body's
    frames: tuple[bytes, ...] = ()  # a stream's, each as the writer frames it (its [DONE] is the writer's)
    counted: int = 0  # how many of the frames are events


MEMO_BYTES = 16 * 1024  # bodies up to this size are remembered (512 of them at most)


async def _read(
    request: Request, ctx: ServerContext, family: Family, data: Json, source: Source, plan: tuple[Fault, ...]
) -> Prepared:
    """The body read against the profile and the schema, and the request it asks for.

    Reading is a pure function of the body's bytes, the path it came by (its profile, Azure's
    deployment) and the faults decided for it, when the family needs nothing else (no
    prelude) and the session it came in (scripted rules read it): an identical request takes
    what the last one made (the same frozen request and parsed objects, which nothing
    changes), with its own ``created``."""
    codec = family.codec
    profile = ctx.profile_of(request.scope)
    content = frozenset(f.name for f in plan if f.kind == "content") if plan else frozenset()
    paced = not ctx.engine.timeline_of(plan).idle
    key: tuple[object, ...] | None = None
    if family.prelude is None and len(source.body) <= MEMO_BYTES:
        key = (codec.id_prefix, profile.name, DEPLOYMENT.get(), source.session, source.body, content, paced)
        known: _Read | None = ctx.reads.get(key)
        if known is not None:
            call = Call(
                gen=known.gen,
                body=known.body,
                profile=profile,
                id=known.id,
                created=int(ctx.clock.now()),
                include_usage=known.include_usage,
                service_tier=known.service_tier,
            )
            return Prepared(request, ctx, call, known.data, plan, ctx.options, known)
    data = params.prepare(data, profile, codec.endpoint, ctx.options.strict)
    params.check_sizes(data, ctx.options.limits)  # before the schema's work grows with them
    body = validated(codec.schema, data)
    stream = bool(getattr(body, "stream", False))
    stream_options: StreamOptions | None = getattr(body, "stream_options", None)
    if stream_options is not None and not stream:
        raise InvalidRequest(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.", param="stream_options"
        )
    options = await family.prelude(ctx, body) if family.prelude is not None else ctx.options
    if len(source.body) > BIG_BODY:
        # Hashing a big body (its canonical JSON) holds the event loop for as long as it takes:
        # first refuse, by its size alone, a prompt that cannot fit whatever it says.
        provisional = codec.to_generation(body, profile, options, Origin(0, b"", source, content, paced))
        prompts.refuse_unfittable(provisional, Tokenizer.shipped())
    canonical = seeding.canonical(data)
    given: int | None = getattr(body, "seed", None)
    seed = given if given is not None else seeding.derive_seed(canonical, ctx.seed)
    gen = codec.to_generation(body, profile, options, Origin(seed, canonical, source, content, paced))
    call = Call(
        gen=gen,
        body=body,
        profile=profile,
        id=seeding.make_id(codec.id_prefix, canonical, seed),
        created=int(ctx.clock.now()),
        include_usage=bool(stream_options and stream_options.include_usage),
        service_tier=params.service_tier(body, profile, codec.endpoint) if codec.surface != "responses" else None,
    )
    read = None
    if key is not None:
        read = _Read(data, body, gen, call.id, call.include_usage, call.service_tier)
        ctx.reads.put(key, read)
    return Prepared(request, ctx, call, data, plan, options, read)


def source_of(scope: Any, raw: bytes, surface: Surface, stream: bool, include_usage: bool) -> Source:
    """Where the request came from (see :class:`~mockserver.spine.request.Source`)."""
    session = cassette = record_mode = None
    for key, value in scope["headers"]:
        if key.startswith(h.PREFIX):
            if key == h.SESSION:
                session = value.decode("latin-1") or None
            elif key == h.CASSETTE:
                cassette = value.decode("latin-1")
            elif key == h.RECORD_MODE:
                record_mode = value.decode("latin-1")
    query = scope.get("query_string", b"")
    target = scope["path"] + ("?" + query.decode("latin-1") if query else "")
    return Source(
        surface,
        session,
        scope["method"],
        target,
        raw,
        tuple(scope["headers"]),
        cassette,
        record_mode,
        stream,
        include_usage,
    )


def answer_headers(gen: GenerationRequest, by: str) -> dict[str, str]:
    """The headers every generated answer carries: its seed, and which backend answered."""
    return {h.name(h.SEED): str(gen.seed), h.name(h.SOURCE): by}


# ---- chat and completions ---------------------------------------------------------------


def deliver_with(codec: Codec) -> Deliver:
    """The delivery of a family whose answer is a body or a stream of chunks."""

    async def deliver(prepared: Prepared, opened: Opened) -> Response:
        return await deliver_completion(prepared, opened, codec)

    return deliver


async def deliver_completion(prepared: Prepared, opened: Opened, codec: Codec) -> Response:
    ctx, call, plan, scope = prepared.ctx, prepared.call, prepared.plan, prepared.request.scope
    gen = call.gen
    keep = _keeper(ctx, codec, call, prepared.data)
    note(scope, applicable(plan, generated=True, stream=gen.stream))
    if gen.stream:
        link = Link()
        assert opened.rest is not None
        rest = opened.rest
        framing = Framing(named=False, done=True, style=call.profile.error_style)
        frames: AsyncIterator[Frame]
        if keep is None and isinstance(rest, Played) and rest.ready:
            frames = ready_frames(prepared, opened.by, rest, framing, lambda made: _Framer(codec, call).all(made))
        else:
            frames = _frames(codec, call, opened.first, rest, keep)
        return event_stream(frames, framing, answer_headers(gen, opened.by), stream_faults(plan, link), link)
    assert opened.rest is not None
    rest = opened.rest
    if keep is None and isinstance(rest, Played) and rest.ready:
        body = ready_body(prepared, opened.by, rest, lambda result: dumps(codec.encode(call, result)))
        return _answer(gen, opened.by, body)
    try:
        result = await unless_gone(prepared.request.receive, folded(opened.by, opened.first, rest))
    except ClientGone:
        return abandoned(scope)
    answer = codec.encode(call, result)
    if keep is not None:
        await keep(answer)
    return _answer(gen, opened.by, dumps(answer))


def _answer(gen: GenerationRequest, by: str, body: bytes) -> Response:
    # The headers as Starlette's Response would write them (its own first, then length and type),
    # made directly: an answer is what test suites ask for most.
    return _Raw(
        200,
        [
            (h.SEED, str(gen.seed).encode()),
            (h.SOURCE, by.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"content-type", b"application/json"),
        ],
        body,
    )


def _journal_origin(scope: Any, origin: str) -> None:
    """The journal's entry (when the request has one) names the rule or recording that answered."""
    entry = scope.get(TALLY_KEY)
    if entry is not None:
        entry.origin = origin


def abandoned(scope: Any) -> Response:
    """What a non-streamed request whose client left gets (nobody reads it): nginx's 499,
    "client closed request", so the journal and /metrics tell it from an answer."""
    entry = scope.get(TALLY_KEY)
    if entry is not None:
        entry.ended = "client_disconnect"
    return Response(status_code=499)


def _keeper(ctx: ServerContext, codec: Codec, call: Call, data: Json) -> Callable[[Json], Awaitable[None]] | None:
    """How to keep the answer (its non-streamed body) of a chat completion asked to be stored
    (``store: true``); None for anything else. Called once the answer is whole, and it
    cannot fail the answer (see :func:`~mockserver.routes.chat_store.remember`)."""
    if codec.surface != "chat" or getattr(call.body, "store", None) is not True:
        return None
    return lambda answer: chat_store.remember(ctx.responses, answer, data)


async def chained(first: Event | None, rest: AsyncIterator[Event]) -> AsyncIterator[Event]:
    try:
        if first is not None:
            yield first
        async for event in rest:
            yield event
    finally:
        await aclose(rest)


class _Framer:
    """The chunks of a chat or completions stream, event by event: what both the waiting and
    the ready stream (below) are made of."""

    def __init__(self, codec: Codec, call: Call) -> None:
        self.codec = codec
        self.call = call
        self.result = Result()
        self.held: list[ChunkFrame] = []  # a choice's closing chunk, while usage may still join it

    def feed(self, event: Event) -> list[ChunkFrame]:
        call = self.call
        self.result.apply(event)
        frames = self.codec.encode_event(call, event, self.result)
        held = self.held
        if isinstance(event, Usage) and held and call.usage_on_last_chunk:
            last = held[-1]
            held[-1] = {**(last.to_json() if isinstance(last, Chunk) else last), "usage": call.usage(self.result)}
        self.held = []
        if isinstance(event, Finished) and call.usage_on_last_chunk:
            self.held = frames
            return held
        return held + frames if held else frames

    def end(self) -> list[ChunkFrame]:
        """The chunks held back, then the closing ones."""
        held, self.held = self.held, []
        return [*held, *self.codec.encode_end(self.call, self.result)]

    def all(self, events: Sequence[Event]) -> list[ChunkFrame]:
        """Every chunk of a stream made at once, the closing ones included."""
        frames: list[ChunkFrame] = []
        for event in events:
            frames += self.feed(event)
        return frames + self.end()


async def _frames(
    codec: Codec,
    call: Call,
    first: Event | None,
    events: AsyncIterator[Event],
    keep: Callable[[Json], Awaitable[None]] | None = None,
) -> AsyncIterator[Frame]:
    """The chunks of a chat or completions stream, one frame at a time (``first`` is the
    answer's first event, taken off ``events`` already)."""
    framer = _Framer(codec, call)
    try:
        if first is not None:
            for frame in framer.feed(first):
                yield frame
        async for event in events:
            for frame in framer.feed(event):
                yield frame
        for frame in framer.held:
            yield frame
        framer.held = []
        if keep is not None:  # before the closing frames: stored by the time the client reads [DONE]
            await keep(codec.encode(call, framer.result))
        for frame in framer.end():
            yield frame
    finally:
        await aclose(events)


def ready_body(prepared: Prepared, by: str, rest: Played, encode: Callable[[Result], bytes]) -> bytes:
    """The body of an answer made at once (a scripted one, an unpaced replay's events), whatever
    the family: its events taken without a wait per event (and counted), folded and ``encode``-d;
    for a body read before, the same events (by identity: a backend hands out the same events for
    the same request) from the same backend within the same second are the same bytes, so the
    last ones are remembered on the read (see :func:`deliver_completion`)."""
    made, read, created = rest.made, prepared.read, prepared.call.created
    rest.drain()  # counted as taken
    _made_at_once(prepared, created, made)
    last = read.answer if read is not None else None
    if last is not None and last.events is made and last.by == by and last.created == created and not last.frames:
        return last.body
    body = encode(fold(by, made))
    if read is not None:
        read.answer = _Encoded(by, made, created, body)
    return body


def ready_frames(
    prepared: Prepared, by: str, rest: Played, framing: Framing, frames_of: Callable[[Sequence[Event]], Sequence[Frame]]
) -> Ready:
    """Every frame of a stream made at once (``frames_of`` the answer's events: the family's
    frames, the closing ones included), handed to the writer with no wait between them; for a
    body read before, as bytes remembered like a whole body's (see :func:`ready_body`)."""
    made, read, created = rest.made, prepared.read, prepared.call.created
    rest.drain()
    _made_at_once(prepared, created, made)
    last = read.answer if read is not None else None
    if last is not None and last.events is made and last.by == by and last.created == created and last.frames:
        return Ready(last.frames, last.counted)
    frames = frames_of(made)
    if read is None:
        return Ready(frames)
    encoded = tuple(framing.encode(frame) for frame in frames)
    read.answer = _Encoded(by, made, created, b"", encoded, events_in(encoded))
    return Ready(encoded)


def _made_at_once(prepared: Prepared, created: int, made: Sequence[Event]) -> None:
    """An answer made at once to a body read as nothing else but its bytes says (see
    :func:`_read`): the edge may remember it."""
    if prepared.read is not None:
        _promise_made(prepared.request.scope, created, made)


def _promise_made(scope: Any, created: int | None, made: Sequence[Event]) -> None:
    """Tell the edge's promise (when the request has one) that the answer was made at once."""
    promise: Promise | None = scope.get(REPEAT_KEY)
    if promise is not None:
        promise.made(created, made)


def stream_faults(plan: tuple[Fault, ...], link: Link) -> StreamFaults | None:
    stream = [f for f in plan if f.kind == "stream"]
    return StreamFaults(stream, link) if stream else None


# ---- recorded answers -------------------------------------------------------------------


async def recorded_response(
    scope: Any,
    by: str,
    head: RecordedHead,
    events: AsyncIterator[Event],
    plan: tuple[Fault, ...],
    style: Any,
    named: bool,
    paced: bool = True,
) -> Response:
    """A recording's answer, byte for byte: a stream under the request's stream faults, or a
    whole body. ``paced``: its events came through the engine (latency applied)."""
    note(scope, applicable(plan, generated=False, stream=head.stream, paced=paced))
    if not head.stream:
        body: list[bytes] = []
        if isinstance(events, Played) and events.ready:  # made at once: no wait per event
            made = events.made
            body = [event.data for event in events.drain() if isinstance(event, RecordedFrame)]
            _promise_made(scope, None, made)  # a recording's bytes: the same in any second
        else:
            try:
                async for event in events:
                    if isinstance(event, RecordedFrame):
                        body.append(event.data)
            finally:
                await aclose(events)
        return _recorded_body(head, body[0] if len(body) == 1 else b"".join(body), by)
    link = Link()
    framing = Framing(named=named, done=False, style=style)
    frames: AsyncIterator[Frame]
    if isinstance(events, Played) and events.ready and not any(_reset(event) for event in events.made):
        # Made at once (an unpaced replay): its frames handed to the writer together, as a
        # scripted stream's are (one write, without stream faults).
        made = events.made
        frames = Ready(tuple(event.data for event in events.drain() if isinstance(event, RecordedFrame)))
        _promise_made(scope, None, made)
    else:
        frames = _recorded_frames(events, link)
    response = event_stream(frames, framing, {}, stream_faults(plan, link), link)
    response.raw_headers = [*_own(head), (h.SOURCE, by.encode())]
    return response


def _reset(event: Event) -> bool:
    """Did the recording end in a reset (which its replay repeats, the writer's long way)?"""
    return isinstance(event, RecordedEnd) and event.how == "reset"


def _recorded_body(head: RecordedHead, body: bytes, by: str) -> Response:
    return _Raw(head.status, [*_own(head), (h.SOURCE, by.encode()), (b"content-length", str(len(body)).encode())], body)


class _Raw(Response):
    """A response of ready bytes and headers, sent as they are (a recording's)."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.status_code = status
        self.raw_headers = headers
        self.body = body
        self.background = None


def _own(head: RecordedHead) -> list[tuple[bytes, bytes]]:
    """A recording's headers but the one we set: who answers here is us (replay, record)."""
    return [(k, v) for k, v in head.headers if k != h.SOURCE]


async def _recorded_frames(events: AsyncIterator[Event], link: Link) -> AsyncIterator[Frame]:
    try:
        async for event in events:
            if isinstance(event, RecordedFrame):
                yield event.data
            elif isinstance(event, RecordedEnd) and event.how == "reset":
                raise StreamEnded("reset", after=link.reset)  # it ended in a reset: so does its replay
    finally:
        await aclose(events)


Handler = Callable[[Request], Awaitable[Response]]


def replayable(endpoint: Handler) -> Handler:
    """``endpoint`` behind the chain's recordings (:meth:`~mockserver.spine.backend.Chain.recorded`):
    a replay or a recording answers with the provider's bytes; where the chain reaches its
    model, or no recording answers, ``endpoint`` answers itself (with no model, a miss is raised)."""

    async def recorded_first(request: Request) -> Response:
        ctx: ServerContext = request.app.state.ctx
        scope = request.scope
        parsed = scope.get(BODY_KEY)
        raw: bytes = parsed[0] if parsed is not None else await request.body()
        fields = parsed[1] if parsed is not None and isinstance(parsed[1], dict) else {}
        options = fields.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        source = source_of(scope, raw, "chat", fields.get("stream") is True, include_usage)
        ask = Ask(source)
        found = await ctx.chain.recorded(ask)
        if found is None:
            return await endpoint(request)
        if ask.origin is not None:
            _journal_origin(scope, ask.origin)
        name, head, events = found
        style = ctx.profile_of(scope).error_style
        return await recorded_response(scope, name, head, events, planned(scope), style, False, paced=False)

    return recorded_first
