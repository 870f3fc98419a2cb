"""Google's Gemini API routes: ``POST /v1beta/models/{model}:{method}`` and the model list.

``generateContent`` and ``streamGenerateContent`` run through the one handler every generation
endpoint shares (:func:`~mockserver.routes.handler.handle`), each with its codec
(:mod:`mockserver.routes.gemini.codec`) and this delivery: a body, SSE chunks (``?alt=sse``) or
a JSON array. The model comes from the path and is read into the body as Azure's deployment is
(:data:`~mockserver.wire.scope.DEPLOYMENT`), so seeds, ids, scripted rules, cassettes, faults
and the journal see one request. ``countTokens`` counts what a generation would read,
``embedContent`` and ``batchEmbedContents`` are the reference model's vectors, and
``GET /v1beta/models[/{model}]`` lists the profile's models in Google's shape.

``/gemini/v1beta/…`` and ``/gemini/v1/…`` reach these routes too (:mod:`mockserver.http.prefix`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.backends import prompts
from mockserver.context import ServerContext
from mockserver.engine import folded
from mockserver.errors import ContextLengthExceeded, InvalidRequest, NotFound
from mockserver.faults.plan import applicable, note
from mockserver.gpt.tokenizer import Tokenizer
from mockserver.http.body import json_body
from mockserver.http.gone import ClientGone, unless_gone
from mockserver.http.link import Link
from mockserver.http.prefix import GEMINI_PROFILE
from mockserver.http.sse import Frame, Framing, event_stream
from mockserver.profiles import PROFILES
from mockserver.routes.gemini import embeddings, models
from mockserver.routes.gemini.codec import GeminiCodec, image_tokens, response_id, thoughts_shown
from mockserver.routes.gemini.stream import ArrayFraming, Chunk, all_chunks, array_frames, chunks, in_array
from mockserver.routes.handler import (
    Deliver,
    Family,
    Handler,
    Opened,
    Prepared,
    abandoned,
    answer_headers,
    handle,
    ready_body,
    ready_frames,
    replayable,
    stream_faults,
)
from mockserver.schemas.common import validated
from mockserver.schemas.gemini import CountTokensRequest, GenerateRequest
from mockserver.spine.backend import Played
from mockserver.spine.events import Event
from mockserver.spine.request import Origin
from mockserver.wire import headers as h
from mockserver.wire.json import Json, dumps
from mockserver.wire.scope import BODY_KEY, DEPLOYMENT

__all__ = ["ARRAY", "BODY", "FIXED", "SSE", "poster", "routes"]

ROOT = "/v1beta/models"
# The generation paths of the profile's own models, also routed as fixed paths: the edge calls a
# route of a fixed path directly, past Starlette's router (a fifth of a scripted answer's cost).
FIXED = tuple(
    f"{ROOT}/{model}:{method}"
    for model in PROFILES[GEMINI_PROFILE].models
    if "embedding" not in model
    for method in ("generateContent", "streamGenerateContent")
)


def _json(body: Any, headers: dict[str, str] | None = None, status: int = 200) -> Response:
    return Response(dumps(body), status_code=status, media_type="application/json", headers=headers)


class _Raw(Response):
    """A response of ready bytes and headers, sent as they are: made directly, without
    Starlette's header work, as an answer is what test suites ask for most."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.status_code = status
        self.raw_headers = headers
        self.body = body
        self.background = None


def _answered(seed: int, by: str) -> list[tuple[bytes, bytes]]:
    return [(h.SEED, str(seed).encode()), (h.SOURCE, by.encode())]


def _length(body: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]


def delivery(codec: GeminiCodec) -> Deliver:
    """How ``codec``'s answers go out: one body, SSE chunks, or a JSON array of chunks."""

    async def deliver(prepared: Prepared, opened: Opened) -> Response:
        call, plan, scope = prepared.call, prepared.plan, prepared.request.scope
        sse = codec.delivery == "sse"
        note(scope, applicable(plan, generated=True, stream=sse))  # the array is not SSE: no stream faults
        assert opened.rest is not None
        rest = opened.rest
        ready = rest if isinstance(rest, Played) and rest.ready else None  # made at once: no wait per event
        if codec.delivery == "body":
            if ready is not None:  # encoded once per read while the same events answer it
                body = ready_body(prepared, opened.by, ready, lambda result: dumps(codec.encode(call, result)))
            else:
                try:
                    result = await unless_gone(prepared.request.receive, folded(opened.by, opened.first, rest))
                except ClientGone:
                    return abandoned(scope)
                body = dumps(codec.encode(call, result))
            return _Raw(200, [*_answered(call.gen.seed, opened.by), *_length(body)], body)
        headers = answer_headers(call.gen, opened.by)
        style = call.profile.error_style
        link = Link()

        def made_chunks(made: Sequence[Event]) -> list[Chunk]:
            return all_chunks(call, response_id(call), thoughts_shown(call), made)

        if sse:
            framing = Framing(named=False, done=False, style=style)
            frames: AsyncIterator[Frame]
            if ready is not None:
                frames = ready_frames(prepared, opened.by, ready, framing, made_chunks)
            else:
                frames = chunks(call, response_id(call), thoughts_shown(call), opened.first, rest)
            return event_stream(frames, framing, headers, stream_faults(plan, link), link)
        array = {**headers, "content-type": "application/json"}
        in_json = ArrayFraming(named=False, done=False, style=style)
        if ready is not None:
            frames = ready_frames(prepared, opened.by, ready, in_json, lambda made: array_frames(made_chunks(made)))
        else:
            frames = in_array(chunks(call, response_id(call), thoughts_shown(call), opened.first, rest))
        return event_stream(frames, in_json, array, None, link)

    return deliver


BODY = GeminiCodec("body")
SSE = GeminiCodec("sse")
ARRAY = GeminiCodec("array")
_FAMILIES = {codec: Family(codec, delivery(codec)) for codec in (BODY, SSE, ARRAY)}


def _split(request: Request) -> tuple[str, str]:
    """``(model, method)`` of ``…/models/{model}:{method}``."""
    # A route of a listed model's fixed path is called by the edge directly, without path parameters.
    name: str = request.path_params.get("name") or request.scope["path"][len(ROOT) + 1 :]
    model, colon, method = name.rpartition(":")
    if not colon or not model:
        raise NotFound(f"Method not found: POST {request.url.path} (want models/{{model}}:{{method}}).")
    return model, method


async def _generate(request: Request, codec: GeminiCodec, model: str) -> Response:
    if codec.delivery == "sse":
        # The handler tells a stream by the body's ``stream`` (a cassette serves a recording in the
        # shape asked for): say so, in what it reads, not in the bytes (kept as sent).
        raw, data = await json_body(request)
        request.scope[BODY_KEY] = (raw, {**data, "stream": True})
    token = DEPLOYMENT.set(model)
    try:
        return await handle(request, _FAMILIES[codec])
    except ContextLengthExceeded as exc:
        raise _in_geminis_words(exc) from None
    finally:
        DEPLOYMENT.reset(token)


# The spine names a conversation's fields as chat does; Gemini's are these.
_FIELDS = {"messages": "contents", "max_tokens": "generationConfig.maxOutputTokens"}


def _in_geminis_words(exc: ContextLengthExceeded) -> InvalidRequest:
    """A context overflow naming Gemini's fields (``contents``, ``maxOutputTokens``)."""
    message = exc.message
    for chat, gemini in _FIELDS.items():
        message = message.replace(f"'{chat}'", f"'{gemini}'").replace(f"the {chat}", f"the {gemini}")
    param = _FIELDS.get(exc.param or "", exc.param)
    return InvalidRequest(message, param=param, code=exc.code)


def poster(recorded: bool) -> Handler:
    """``POST /v1beta/models/{model}:{method}``; with ``recorded``, the methods that generate
    nothing answer from recordings first (the generating ones always go through the chain)."""

    async def others(request: Request) -> Response:
        model, method = _split(request)
        answer = _OTHERS.get(method)
        if answer is None:
            raise NotFound(f"Method not found: models/{model}:{method}.")
        return await answer(request, model)

    first = replayable(others) if recorded else others

    async def post(request: Request) -> Response:
        model, method = _split(request)
        if method == "generateContent":
            return await _generate(request, BODY, model)
        if method == "streamGenerateContent":
            sse = request.query_params.get("alt") == "sse"
            return await _generate(request, SSE if sse else ARRAY, model)
        return await first(request)

    return post


async def count_tokens(request: Request, model: str) -> Response:
    """What ``generateContent`` would report as ``promptTokenCount`` for these contents."""
    ctx: ServerContext = request.app.state.ctx
    profile = ctx.profile_of(request.scope)
    _, data = await json_body(request)
    asked = validated(CountTokensRequest, data)
    if asked.generate_content_request is not None:
        whole: Json = {**asked.generate_content_request, "model": model}
    elif asked.contents is not None:
        whole = {"contents": data.get("contents"), "model": model}
    else:
        raise InvalidRequest("Invalid value at 'contents': contents must not be empty.", param="contents")
    body = validated(GenerateRequest, whole)
    gen = BODY.to_generation(body, profile, ctx.options, Origin())
    try:
        counted = sum(p.size for p in await prompts.prepare_off_loop(gen, Tokenizer.shipped()))
    except ContextLengthExceeded as exc:
        raise _in_geminis_words(exc) from None
    images = image_tokens(gen)
    details = [{"modality": "TEXT", "tokenCount": counted - images}]
    if images:
        details.append({"modality": "IMAGE", "tokenCount": images})
    return _json({"totalTokens": counted, "promptTokensDetails": details})


_OTHERS: dict[str, Callable[[Request, str], Awaitable[Response]]] = {
    "countTokens": count_tokens,
    "embedContent": embeddings.embed_content,
    "batchEmbedContents": embeddings.batch_embed_contents,
}


def routes(recorded: bool = False) -> list[BaseRoute]:
    """Google's routes; with ``recorded`` the ones that generate nothing answer from recordings first."""
    listing: Handler = models.list_models
    one: Handler = models.get_model
    if recorded:
        listing, one = replayable(listing), replayable(one)
    post = poster(recorded)
    return [
        Route(ROOT + "/{name:path}", post, methods=["POST"]),
        Route(ROOT, listing, methods=["GET"]),
        Route(ROOT + "/{name:path}", one, methods=["GET"]),
        # Listed after the template, which the router (and so any other model) still matches first.
        *(Route(path, post, methods=["POST"]) for path in FIXED),
    ]
