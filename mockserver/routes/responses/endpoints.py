"""``/v1/responses``: create, retrieve (and resume its stream), cancel, delete, list input
items, count input tokens.

Creating decodes the body with the codec (:mod:`mockserver.routes.responses.codec`), gives
the response the first of its deterministic ids that is free in the store, and hands a
:class:`~mockserver.responses.lifecycle.Job` to the lifecycle: run in the foreground (folded into one
body, or streamed), or spawned in the background and followed from the store.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.answers import director
from mockserver.context import ServerContext
from mockserver.faults.catalogue import Fault
from mockserver.faults.injector import BODY_KEY, PLAN_KEY
from mockserver.http.sse import dumps, event_sse_response
from mockserver.responses.lifecycle import Job, Lifecycle
from mockserver.responses.store import Record
from mockserver.routes import params
from mockserver.routes.handler import parse_json
from mockserver.routes.responses import codec
from mockserver.routes.responses.narrator import ResponseNarrator, Turn
from mockserver.schemas.common import WireModel, invalid_request
from mockserver.schemas.responses import InputTokensRequest, ResponsesRequest
from mockserver.spine import seeding
from mockserver.spine.events import Event
from mockserver.spine.request import ChatMessage, GenerationRequest, Prompt, Sampling

__all__ = ["routes"]

_M = TypeVar("_M", bound=WireModel)

# IncludeEnum of the spec: accepted; only the logprobs one changes anything here.
_INCLUDES = frozenset(
    {
        "file_search_call.results",
        "web_search_call.results",
        "web_search_call.action.sources",
        "message.input_image.image_url",
        "computer_call_output.output.image_url",
        "code_interpreter_call.outputs",
        "reasoning.encrypted_content",
        "message.output_text.logprobs",
    }
)


def _json(body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(body), media_type="application/json", headers=headers)


def _lifecycle(request: Request) -> tuple[ServerContext, Lifecycle]:
    ctx: ServerContext = request.app.state.ctx
    if ctx.responses is None:
        raise RuntimeError("the app was built without a Responses lifecycle")
    return ctx, ctx.responses


async def _body(request: Request, schema: type[_M]) -> tuple[dict[str, Any], _M]:
    parsed = request.scope.get(BODY_KEY)  # the injector read and parsed the body already
    raw = parsed[1] if parsed is not None and isinstance(parsed[1], dict) else parse_json(await request.body())
    ctx: ServerContext = request.app.state.ctx
    # Only extra_body is lifted: no profile documents Responses fields yet, so none are dropped.
    data = params.prepare(raw, ctx.profile_of(request.scope), "chat", strict=False)
    try:
        return data, schema.model_validate(data)
    except ValidationError as exc:
        raise invalid_request(exc) from None


async def _history(lifecycle: Lifecycle, previous: str | None) -> codec.Conversation:
    """The conversation ``previous_response_id`` continues: its input, then its output."""
    if previous is None:
        return ()
    record = await lifecycle.get(previous, param="previous_response_id")
    return (*record.messages, ("assistant", codec.assistant_text(record.response)))


def _messages(
    instructions: str | None, turns: codec.Conversation, images: tuple[int, ...] = ()
) -> tuple[ChatMessage, ...]:
    """The chat the model reads; ``images`` are the image tokens of the *last* turns (the
    request's own input: earlier turns of a stored conversation keep only their text)."""
    head = (ChatMessage("system", instructions),) if instructions else ()
    costs = (0,) * (len(turns) - len(images)) + images
    return head + tuple(ChatMessage(role, text, cost) for (role, text), cost in zip(turns, costs, strict=True))


async def create(request: Request) -> Response:
    ctx, lifecycle = _lifecycle(request)
    profile = ctx.profile_of(request.scope)
    faults: tuple[Fault, ...] = request.scope.get(PLAN_KEY, ())
    data, body = await _body(request, ResponsesRequest)
    unknown = sorted(set(body.include or ()) - _INCLUDES)
    if unknown:
        raise params.invalid("include", f"'{unknown[0]}' is not one of {', '.join(sorted(_INCLUDES))}.")
    stored, background, stream = body.store is not False, bool(body.background), bool(body.stream)
    if background and not stored:
        raise params.invalid("background", "background responses must be stored ('store' cannot be false).")
    history = await _history(lifecycle, body.previous_response_id)
    own = codec.conversation(body)
    canonical = seeding.canonical(data)
    seed = body.seed if body.seed is not None else seeding.derive_seed(canonical, ctx.settings.seed)
    gen = director.direct(
        codec.generation(
            _messages(body.instructions, history + own, codec.image_costs(body)), body, ctx, profile, canonical, seed
        ),
        ctx.script,
        "responses",
        request.headers.get("x-mockserver-session"),
        frozenset(f.name for f in faults),
    )
    headers = {"x-mockserver-seed": str(seed)}
    # A foreground request's errors (context overflow) are an HTTP status: prime it first.
    primed = None if background else await ctx.engine.primed(gen, faults)
    now = ctx.clock.now()
    created_at = int(now)
    for n in itertools.count():  # the request's first id not taken by a stored response
        salt = canonical if n == 0 else canonical + f"#{n}".encode()
        turn = Turn(seeding.make_id("resp_", salt, seed), created_at, body, stored)
        narrator = ResponseNarrator(turn, ctx.clock)
        record = Record(
            id=turn.id,
            response=narrator.snapshot("queued" if background else "in_progress"),
            input_items=codec.input_items(body, turn.id),
            messages=history + own,
            background=background,
            stream=stream,
        )
        if not stored or await lifecycle.store.create(record):
            break
    if background:
        lifecycle.spawn(Job(turn.id, narrator, lambda: ctx.engine.primed(gen, faults), True, True, now))
        if stream:
            return event_sse_response(lifecycle.follow(turn.id, -1), headers)
        return _json(record.response, headers)
    assert primed is not None
    ready = primed

    async def source() -> AsyncIterator[Event]:
        return ready

    job = Job(turn.id, narrator, source, False, stored)
    if stream:
        return event_sse_response(lifecycle.run(job), headers)
    final: dict[str, Any] = record.response
    async for event in lifecycle.run(job):
        final = event.get("response", final)
    return _json(final, headers)


def _int(request: Request, name: str, default: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise params.invalid(name, f"'{raw}' is not an integer.") from None


async def retrieve(request: Request) -> Response:
    """The stored response; with ``?stream=true`` its stream, after ``starting_after``."""
    _, lifecycle = _lifecycle(request)
    record = await lifecycle.get(request.path_params["response_id"])
    if request.query_params.get("stream", "false").lower() not in ("true", "1"):
        return _json(record.response)
    if not (record.background and record.stream):
        raise params.invalid(
            "stream", "only responses created with background=true and stream=true can be streamed again."
        )
    after = _int(request, "starting_after", -1)
    assert after is not None
    if after < -1 or after >= record.events:
        raise params.invalid(
            "starting_after", f"{after} is not a sequence number of this stream (0–{record.events - 1})."
        )
    return event_sse_response(lifecycle.follow(record.id, after))


async def cancel(request: Request) -> Response:
    _, lifecycle = _lifecycle(request)
    return _json((await lifecycle.cancel(request.path_params["response_id"])).response)


async def delete(request: Request) -> Response:
    _, lifecycle = _lifecycle(request)
    response_id = request.path_params["response_id"]
    await lifecycle.delete(response_id)
    return _json({"id": response_id, "object": "response", "deleted": True})


async def list_input_items(request: Request) -> Response:
    _, lifecycle = _lifecycle(request)
    record = await lifecycle.get(request.path_params["response_id"])
    limit = _int(request, "limit", 20)
    assert limit is not None
    if not 1 <= limit <= 100:
        raise params.invalid("limit", "must be between 1 and 100.")
    order = request.query_params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise params.invalid("order", f"'{order}' is not one of asc, desc.")
    items = list(record.input_items) if order == "asc" else list(reversed(record.input_items))
    after = request.query_params.get("after")
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise params.invalid("after", f"no input item '{after}' in this response.")
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    return _json(
        {
            "object": "list",
            "data": page,
            "has_more": len(items) > limit,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
        }
    )


async def input_tokens(request: Request) -> Response:
    """Tokens the model would read: the rendered conversation, counted by the backend itself
    (one greedy step, so any backend's count is its own)."""
    ctx, lifecycle = _lifecycle(request)
    profile = ctx.profile_of(request.scope)
    _, body = await _body(request, InputTokensRequest)
    history = await _history(lifecycle, body.previous_response_id)
    messages = _messages(body.instructions, history + codec.conversation(body), codec.image_costs(body))
    window = ctx.context_window(body.model, profile)
    gen = GenerationRequest("chat", body.model, (Prompt(messages=messages),), 1, _COUNT, 0, window)
    result = await ctx.engine.complete(gen)
    counted = result.usage.prompt_tokens if result.usage is not None else 0
    return _json({"object": "response.input_tokens", "input_tokens": counted})


_COUNT = Sampling(temperature=0.0, max_tokens=1)


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/responses", create, methods=["POST"]),
        Route("/v1/responses/input_tokens", input_tokens, methods=["POST"]),
        Route("/v1/responses/{response_id}", retrieve, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/cancel", cancel, methods=["POST"]),
        Route("/v1/responses/{response_id}/input_items", list_input_items, methods=["GET"]),
    ]
