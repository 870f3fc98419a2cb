"""The one handler behind every generation endpoint.

``body ─params.prepare→ schema → codec.to_generation → engine → codec.encode (JSON)
| codec.encode_event (SSE)``, all of it as the request's profile (its path prefix's, else
the server's) says.

A codec is the only thing an endpoint family adds: pure functions from the wire to a
:class:`GenerationRequest` and from the folded :class:`Result` (or one event) back to the
wire, testable without HTTP.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from mockserver.answers import director
from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest
from mockserver.faults.catalogue import Fault
from mockserver.faults.injector import BODY_KEY, PLAN_KEY
from mockserver.http.sse import dumps, sse_response
from mockserver.profiles import Endpoint, Profile
from mockserver.routes import params
from mockserver.schemas.common import GenerationFields, StreamOptions, invalid_request
from mockserver.spine import seeding
from mockserver.spine.events import Event, Finished, Usage
from mockserver.spine.request import GenerationRequest
from mockserver.spine.result import Result

__all__ = ["Call", "Codec", "handle", "parse_json", "usage_body"]


@dataclass(frozen=True, slots=True)
class Call:
    """One request as the codec sees it while encoding: what was asked, and as whom."""

    gen: GenerationRequest
    body: Any  # the validated wire body (codec-specific details)
    profile: Profile
    id: str
    created: int
    include_usage: bool
    service_tier: str | None  # reported in the body (None: no such field)

    @property
    def usage_on_last_chunk(self) -> bool:
        """Streams carry usage on their last chunk unasked (Fireworks, Together)."""
        return self.profile.usage_in_stream == "always" and not self.include_usage

    def envelope(self, obj: str) -> dict[str, Any]:
        """The fields every body and chunk of this call starts with."""
        head: dict[str, Any] = {"id": self.id, "object": obj, "created": self.created, "model": self.gen.model}
        if self.profile.system_fingerprint is not None:
            head["system_fingerprint"] = self.profile.system_fingerprint
        head.update(self.profile.extras)
        if self.service_tier is not None:
            head["service_tier"] = self.service_tier
        return head

    def chunk(self, obj: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        """A stream chunk; with ``include_usage`` every chunk says ``"usage": null``."""
        chunk = {**self.envelope(obj), "choices": choices}
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def usage(self, result: Result) -> dict[str, Any]:
        return usage_body(result.usage, self.profile.usage_details)

    def usage_chunks(self, obj: str, result: Result) -> list[dict[str, Any]]:
        """The closing usage chunk (``choices: []``), if the client asked for one."""
        if not self.include_usage:
            return []
        return [{**self.envelope(obj), "choices": [], "usage": self.usage(result)}]

    def finish(self, reason: str | None, matched: str | int | None) -> dict[str, Any]:
        """``finish_reason`` in the profile's words, and vLLM's ``stop_reason`` if it has one."""
        if reason == "stop" and matched is None:
            reason = self.profile.eos_finish_reason
        fields: dict[str, Any] = {"finish_reason": reason}
        if self.profile.stop_reason:
            fields["stop_reason"] = matched
        return fields


class Codec(Protocol):
    @property
    def schema(self) -> type[GenerationFields]: ...

    @property
    def endpoint(self) -> Endpoint: ...

    @property
    def id_prefix(self) -> str: ...

    def to_generation(
        self, body: Any, ctx: ServerContext, profile: Profile, canonical: bytes, seed: int
    ) -> GenerationRequest: ...

    def encode(self, call: Call, result: Result) -> dict[str, Any]: ...

    def encode_event(self, call: Call, event: Event, result: Result) -> list[dict[str, Any]]: ...

    def encode_end(self, call: Call, result: Result) -> list[dict[str, Any]]: ...


def parse_json(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, or OpenAI's 400 for anything else."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequest(
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
            "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
            "sent was not valid JSON.)"
        ) from None
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return data


def usage_body(usage: Usage | None, details: str = "openai") -> dict[str, Any]:
    """Token counts; ``details`` is the profile's style of the ``*_tokens_details`` objects."""
    u = usage or Usage(0, 0)
    body: dict[str, Any] = {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
    }
    if details == "null":
        body.update(prompt_tokens_details=None, completion_tokens_details=None)
    elif details == "openai":
        body["prompt_tokens_details"] = {"cached_tokens": 0, "audio_tokens": 0}
        body["completion_tokens_details"] = {
            "reasoning_tokens": u.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
    return body


async def handle(request: Request, codec: Codec) -> Response:
    ctx: ServerContext = request.app.state.ctx
    profile = ctx.profile_of(request.scope)
    faults: tuple[Fault, ...] = request.scope.get(PLAN_KEY, ())
    parsed = request.scope.get(BODY_KEY)  # the injector read and parsed the body already
    raw_data = parsed[1] if parsed is not None and isinstance(parsed[1], dict) else parse_json(await request.body())
    data = params.prepare(raw_data, profile, codec.endpoint, ctx.settings.strict)
    try:
        body = codec.schema.model_validate(data)
    except ValidationError as exc:
        raise invalid_request(exc) from None
    stream = bool(getattr(body, "stream", False))
    options: StreamOptions | None = getattr(body, "stream_options", None)
    if options is not None and not stream:
        raise InvalidRequest(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.", param="stream_options"
        )
    canonical = seeding.canonical(data)
    given: int | None = getattr(body, "seed", None)
    seed = given if given is not None else seeding.derive_seed(canonical, ctx.settings.seed)
    gen = director.direct(
        codec.to_generation(body, ctx, profile, canonical, seed),
        ctx.script,
        codec.endpoint,
        request.headers.get("x-mockserver-session"),
        frozenset(f.name for f in faults),
    )
    call = Call(
        gen=gen,
        body=body,
        profile=profile,
        id=seeding.make_id(codec.id_prefix, canonical, seed),
        created=int(ctx.clock.now()),
        include_usage=bool(options and options.include_usage),
        service_tier=params.service_tier(body, profile, codec.endpoint),
    )
    headers = {"x-mockserver-seed": str(seed)}
    keep = _keeper(ctx, codec, call, data)
    if stream:
        events = await ctx.engine.primed(gen, faults)
        return sse_response(_frames(codec, call, events, keep), headers, profile.error_style)
    result = await ctx.engine.complete(gen, faults)
    answer = codec.encode(call, result)
    if keep is not None:
        await keep(answer)
    return Response(dumps(answer), media_type="application/json", headers=headers)


def _keeper(
    ctx: ServerContext, codec: Codec, call: Call, data: dict[str, Any]
) -> Callable[[dict[str, Any]], Awaitable[None]] | None:
    """How to keep the answer (its non-streamed body) of a chat completion asked to be stored
    (``store: true``); None for anything else. Called once the answer is whole, and it
    cannot fail the answer (see :func:`~mockserver.routes.chat_store.remember`)."""
    if codec.endpoint != "chat" or getattr(call.body, "store", None) is not True or ctx.responses is None:
        return None
    from mockserver.routes import chat_store  # late: chat_store imports this module

    return lambda answer: chat_store.remember(ctx, answer, data)


async def _frames(
    codec: Codec,
    call: Call,
    events: AsyncIterator[Event],
    keep: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
) -> AsyncIterator[list[dict[str, Any]]]:
    result = Result()
    held: list[dict[str, Any]] = []  # a choice's closing chunk, while usage may still join it
    async for event in events:
        result.apply(event)
        frames = codec.encode_event(call, event, result)
        if isinstance(event, Usage) and held and call.usage_on_last_chunk:
            held[-1] = {**held[-1], "usage": call.usage(result)}
        if held:
            yield held
            held = []
        if isinstance(event, Finished) and call.usage_on_last_chunk:
            held = frames
        elif frames:
            yield frames
    if held:
        yield held
    if keep is not None:  # before the closing frames: stored by the time the client reads [DONE]
        await keep(codec.encode(call, result))
    yield codec.encode_end(call, result)
