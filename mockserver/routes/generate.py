"""The one handler behind every generation endpoint.

``body ─schema→ codec.to_generation → engine → codec.encode (JSON) | codec.encode_event (SSE)``

A codec is the only thing an endpoint family adds: pure functions from the wire to a
:class:`GenerationRequest` and from the folded :class:`Result` (or one event) back to the
wire, testable without HTTP.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from mockserver import seeding
from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest
from mockserver.generation import Event, GenerationRequest, Result, Usage
from mockserver.schemas.common import StreamOptions, WireModel, invalid_request
from mockserver.streaming import dumps, sse_response

__all__ = ["Call", "Codec", "handle", "parse_json", "usage_body"]


@dataclass(frozen=True, slots=True)
class Call:
    """One request as the codec sees it while encoding."""

    gen: GenerationRequest
    id: str
    created: int
    model: str
    include_usage: bool
    system_fingerprint: str | None

    def envelope(self, obj: str) -> dict[str, Any]:
        """The fields every body and chunk of this call starts with."""
        head: dict[str, Any] = {"id": self.id, "object": obj, "created": self.created, "model": self.model}
        if self.system_fingerprint is not None:
            head["system_fingerprint"] = self.system_fingerprint
        return head

    def chunk(self, obj: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        """A stream chunk; with ``include_usage`` every chunk says ``"usage": null``."""
        chunk = {**self.envelope(obj), "choices": choices}
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def usage_chunks(self, obj: str, result: Result) -> list[dict[str, Any]]:
        """The closing usage chunk (``choices: []``), if the client asked for one."""
        if not self.include_usage:
            return []
        return [{**self.envelope(obj), "choices": [], "usage": usage_body(result.usage)}]


class Codec(Protocol):
    @property
    def schema(self) -> type[WireModel]: ...

    @property
    def id_prefix(self) -> str: ...

    def to_generation(self, body: Any, ctx: ServerContext, canonical: bytes, seed: int) -> GenerationRequest: ...

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


def usage_body(usage: Usage | None) -> dict[str, Any]:
    u = usage or Usage(0, 0)
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


async def handle(request: Request, codec: Codec) -> Response:
    ctx: ServerContext = request.app.state.ctx
    data = parse_json(await request.body())
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
    gen = codec.to_generation(body, ctx, canonical, seed)
    call = Call(
        gen=gen,
        id=seeding.make_id(codec.id_prefix, canonical, seed),
        created=int(ctx.clock.now()),
        model=gen.model,
        include_usage=bool(options and options.include_usage),
        system_fingerprint=ctx.profile.system_fingerprint,
    )
    headers = {"x-mockserver-seed": str(seed)}
    if stream:
        events = await ctx.engine.primed(gen)
        return sse_response(_frames(codec, call, events), headers)
    result = await ctx.engine.complete(gen)
    return Response(dumps(codec.encode(call, result)), media_type="application/json", headers=headers)


async def _frames(codec: Codec, call: Call, events: AsyncIterator[Event]) -> AsyncIterator[list[dict[str, Any]]]:
    result = Result()
    async for event in events:
        result.apply(event)
        yield codec.encode_event(call, event, result)
    yield codec.encode_end(call, result)
