"""Anthropic's endpoints: ``POST /v1/messages``, ``POST /v1/messages/count_tokens`` and
``GET /v1/models[/{model_id}]`` in Anthropic's shape.

A create runs through the one generation handler (:func:`~mockserver.routes.handler.handle`)
with the Messages codec and this module's delivery: a ``Message`` body, or its stream
(:mod:`mockserver.routes.anthropic.stream`) as named SSE events with no ``[DONE]``. Every
answer carries ``request-id`` (the header Anthropic's SDK reads) beside ``x-request-id``. A
turn of a server-side thread (the beta ``thread`` field) is read as its whole conversation and
kept once answered (:mod:`mockserver.routes.anthropic.threads`).
The paths are Anthropic's at the root and under ``/anthropic/`` (both answered as the
``anthropic`` profile, so errors there are in Anthropic's envelope; see
:mod:`mockserver.http.prefix`). ``/v1/models`` answers in Anthropic's shape when the
request came as the ``anthropic`` profile or, at the root, sends ``anthropic-version`` (as
every Anthropic client does); otherwise it is OpenAI's list.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.backends import prompts
from mockserver.context import ServerContext
from mockserver.engine import folded
from mockserver.faults.plan import applicable, note
from mockserver.gpt.tokenizer import Tokenizer
from mockserver.http.body import json_body
from mockserver.http.gone import ClientGone, unless_gone
from mockserver.http.link import Link
from mockserver.http.request_id import request_id
from mockserver.http.sse import Frame, event_stream
from mockserver.profiles import PROFILES, Profile
from mockserver.routes import models, params
from mockserver.routes.anthropic import codec, message, stream, threads
from mockserver.routes.anthropic.stream import MessagesFraming
from mockserver.routes.handler import (
    Family,
    Opened,
    Prepared,
    abandoned,
    answer_headers,
    handle,
    ready_body,
    ready_frames,
    stream_faults,
)
from mockserver.schemas.anthropic import CountTokensRequest
from mockserver.schemas.common import validated
from mockserver.spine.backend import Played
from mockserver.spine.request import Origin
from mockserver.wire import headers as h
from mockserver.wire.json import Json, dumps
from mockserver.wire.scope import BODY_KEY

__all__ = ["FAMILY", "STYLE", "count_tokens", "create", "deliver", "routes"]

STYLE = "anthropic"  # the error style that marks a profile answering as Anthropic
PROFILE = "anthropic"  # the profile an Anthropic client at the root is answered as
VERSION = b"anthropic-version"
REQUEST_ID = b"request-id"
MODEL_CREATED = "2025-05-14T00:00:00Z"  # a fixed date: listings are byte-stable
COUNT_MAX_TOKENS = 1  # a token count reserves room for one token, as a create's window check does


class _Raw(Response):
    """Ready bytes and headers, sent as they are (the hot path: no header parsing)."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.status_code = status
        self.raw_headers = headers
        self.body = body
        self.background = None


def _json(request: Request, body: Json, status: int = 200) -> Response:
    data = dumps(body)
    headers = [(b"content-length", str(len(data)).encode()), (b"content-type", b"application/json")]
    given = request_id(request.scope)
    if given is not None:
        headers.append((REQUEST_ID, given.encode()))
    return _Raw(status, headers, data)


async def deliver(prepared: Prepared, opened: Opened) -> Response:
    """A ``Message``, folded whole or streamed."""
    call, plan, scope = prepared.call, prepared.plan, prepared.request.scope
    gen = call.gen
    note(scope, applicable(plan, generated=True, stream=gen.stream))
    rid = request_id(scope)
    keep = _keeper(prepared)
    assert opened.rest is not None
    rest = opened.rest
    ready = rest if keep is None and isinstance(rest, Played) and rest.ready else None  # made at once
    if gen.stream:
        link = Link()
        named = answer_headers(gen, opened.by)
        if rid is not None:
            named[REQUEST_ID.decode()] = rid
        framing = MessagesFraming(named=True, done=False, style=call.profile.error_style)
        frames: AsyncIterator[Frame]
        if ready is not None:
            frames = ready_frames(prepared, opened.by, ready, framing, lambda made: stream.all_frames(call, made))
        else:
            frames = stream.frames(call, opened.first, rest, keep)
        return event_stream(frames, framing, named, stream_faults(plan, link), link)
    if ready is not None:
        body = ready_body(prepared, opened.by, ready, lambda result: dumps(message.message(call, result)))
    else:
        try:
            result = await unless_gone(prepared.request.receive, folded(opened.by, opened.first, rest))
        except ClientGone:
            return abandoned(scope)
        answer = message.message(call, result)
        if keep is not None:
            await keep(answer)
        body = dumps(answer)
    headers = [
        (h.SEED, str(gen.seed).encode()),
        (h.SOURCE, opened.by.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"content-type", b"application/json"),
    ]
    if rid is not None:
        headers.append((REQUEST_ID, rid.encode()))
    return _Raw(200, headers, body)


def _keeper(prepared: Prepared) -> Callable[[Json], Awaitable[None]] | None:
    """How to keep a threaded turn once its message is whole (None: not threaded)."""
    if not threads.threaded(prepared.data):
        return None
    return lambda message: threads.keep(prepared.ctx, prepared.data, message)


FAMILY = Family(codec.CODEC, deliver)


async def create(request: Request) -> Response:
    """A create; a ``thread`` continued is read as its whole conversation (:mod:`.threads`)."""
    _, data = await json_body(request)
    if isinstance(data, dict) and threads.threaded(data):
        whole = await threads.resolve(request.app.state.ctx, data)
        if whole is not None:
            request.scope[BODY_KEY] = (dumps(whole), whole)  # what the handler reads: the whole turn
    return await handle(request, FAMILY)


async def count_tokens(request: Request) -> Response:
    """``{"input_tokens": N}``: what a create with this body reports as ``usage.input_tokens``
    (the same conversation, rendered and counted by the shipped tokenizer; no model needed)."""
    ctx: ServerContext = request.app.state.ctx
    profile = ctx.profile_of(request.scope)
    _, data = await json_body(request)
    data = params.prepare(data, profile, "chat", ctx.options.strict)
    body = validated(CountTokensRequest, data)
    gen = codec.build(body, profile, ctx.options, Origin(), COUNT_MAX_TOKENS)
    # With ``thinking`` the prompt opens the model's thinking turn, as a create the model answers
    # reads it (an answer decided beforehand, scripted or a tool call, is given without thinking).
    counted = sum(p.size for p in await prompts.prepare_off_loop(gen, Tokenizer.shipped()))
    return _json(request, {"input_tokens": counted})


def anthropic(profile: Profile) -> bool:
    return profile.error_style == STYLE


def _profile(request: Request) -> Profile | None:
    """The Anthropic profile a request is answered as (None: not an Anthropic request): by its
    path, or at the root by the ``anthropic-version`` header every Anthropic client sends."""
    ctx: ServerContext = request.app.state.ctx
    profile = ctx.profile_of(request.scope)
    if anthropic(profile):
        return profile
    if any(key == VERSION for key, _ in request.scope["headers"]):
        return PROFILES[PROFILE]
    return None


def describe(model: str) -> Json:
    """A ``ModelInfo``: its id, a display name made from it, a fixed creation date."""
    name = model.replace("-", " ").title() if model.startswith("claude") else model
    return {"type": "model", "id": model, "display_name": name, "created_at": MODEL_CREATED}


Endpoint = Callable[[Request], Awaitable[Response]]


def _as_profile(own: Endpoint, openai: Endpoint) -> Endpoint:
    """``own`` for a request answered as Anthropic, else the OpenAI endpoint of the same path."""

    async def endpoint(request: Request) -> Response:
        return await (own if _profile(request) is not None else openai)(request)

    return endpoint


async def _list_models(request: Request) -> Response:
    """Anthropic's page: ``data``, ``first_id``, ``last_id``, ``has_more`` (``limit``, ``after_id``,
    ``before_id`` honoured over the profile's list)."""
    ctx: ServerContext = request.app.state.ctx
    ids = list(ctx.options.models.listed(_profile(request) or ctx.profile))
    query = request.query_params
    raw = query.get("limit", "20")
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        raise params.invalid("limit", "must be an integer between 1 and 1000.")
    limit = int(raw)
    after, before = query.get("after_id"), query.get("before_id")
    for name, given in (("after_id", after), ("before_id", before)):
        if given is not None and given not in ids:
            raise params.invalid(name, f"no model '{given}' in this list.")
    if after is not None:
        ids = ids[ids.index(after) + 1 :]
    if before is not None:
        ids = ids[max(0, ids.index(before) - limit) : ids.index(before)]
    page = ids[:limit]
    return _json(
        request,
        {
            "data": [describe(m) for m in page],
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
            "has_more": len(ids) > limit,
        },
    )


async def _retrieve_model(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    model = request.path_params["model"]
    if model not in ctx.options.models.listed(_profile(request) or ctx.profile):
        from mockserver.errors import NotFound

        raise NotFound(f"model: {model}", param="model")
    return _json(request, describe(model))


def routes() -> list[BaseRoute]:
    """The Messages routes, and the model routes that answer as the request's profile
    (listed before the OpenAI ones of the same paths)."""
    return [
        Route("/v1/messages", create, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/models", _as_profile(_list_models, models.list_models), methods=["GET"]),
        Route("/v1/models/{model:path}", _as_profile(_retrieve_model, models.retrieve_model), methods=["GET"]),
    ]
