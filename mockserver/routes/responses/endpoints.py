"""``/v1/responses``: create, retrieve (and resume its stream), cancel, delete, list input
items, count input tokens.

Creating decodes the body with the codec (:mod:`mockserver.routes.responses.codec`), gives
the response the first of its deterministic ids that is free in the store, and hands a
:class:`~mockserver.lifecycle.runs.Run` to the lifecycle: run in the foreground (folded into
one body, or streamed), or spawned in the background and followed from the store. The handler
is the one every generation endpoint shares (:mod:`mockserver.routes.handler`).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.backends import prompts
from mockserver.context import Conversation, Options, ServerContext
from mockserver.errors import InvalidRequest
from mockserver.faults.plan import applicable, note, planned
from mockserver.gpt.tokenizer import Tokenizer
from mockserver.http.body import json_body
from mockserver.http.gone import ClientGone, unless_gone
from mockserver.http.link import Link
from mockserver.http.sse import Framing, event_stream
from mockserver.lifecycle.runs import Lifecycle, Run
from mockserver.routes import conversations, params
from mockserver.routes.handler import Family, Opened, Prepared, abandoned, answer_headers, handle, stream_faults
from mockserver.routes.responses import codec, mcp_tool
from mockserver.routes.responses.narrator import ResponseNarrator, Turn
from mockserver.schemas.common import refuse_unencodable, validated
from mockserver.schemas.responses import InputTokensRequest, ResponsesRequest
from mockserver.spine import seeding
from mockserver.spine.backend import aclose
from mockserver.spine.events import Event
from mockserver.spine.request import GenerationRequest, Prompt, Sampling
from mockserver.state.records import Record
from mockserver.wire.json import Json, dumps

__all__ = ["FAMILY", "deliver", "prelude", "routes"]

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


def _lifecycle(request: Request) -> Lifecycle:
    ctx: ServerContext = request.app.state.ctx
    return ctx.responses


async def _history(lifecycle: Lifecycle, previous: str | None) -> Conversation:
    """The conversation ``previous_response_id`` continues: its input, then its output."""
    if previous is None:
        return ()
    record = await lifecycle.get(previous, param="previous_response_id")
    return (*record.messages, ("assistant", codec.assistant_text(record.response)))


async def prelude(ctx: ServerContext, body: ResponsesRequest) -> Options:
    """What must be checked and read before the request can be built: ``include``, whether a
    background response is stored, and the conversation it continues."""
    unknown = sorted(set(body.include or ()) - _INCLUDES)
    if unknown:
        raise params.invalid("include", f"'{unknown[0]}' is not one of {', '.join(sorted(_INCLUDES))}.")
    if body.background and body.store is False:
        raise params.invalid("background", "background responses must be stored ('store' cannot be false).")
    return replace(ctx.options, history=await _continued(ctx, body))


async def _continued(ctx: ServerContext, body: ResponsesRequest | InputTokensRequest) -> Conversation:
    """The conversation the request continues: ``previous_response_id``'s, or ``conversation``'s
    items (never both: the spec's 400)."""
    conversation = codec.conversation_id(body)
    if conversation is None:
        return await _history(ctx.responses, body.previous_response_id)
    if body.previous_response_id is not None:
        raise InvalidRequest(
            "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or "
            "'conversation'.",
            param="conversation",
            code="mutually_exclusive_parameters",
        )
    refuse_unencodable(body.model_dump(include={"input", "instructions"}), "")  # it goes into the conversation
    return await conversations.history(ctx, conversation)


async def deliver(prepared: Prepared, opened: Opened) -> Response:
    """Run the response through the lifecycle: in the foreground (folded into one body, or
    streamed), or spawned in the background and followed from the store. It gets the first of
    its deterministic ids that is free in the store. A background run whose request failed to
    start (a context overflow) fails in its record, as it would have had it started later."""
    ctx, call, plan, scope = prepared.ctx, prepared.call, prepared.plan, prepared.request.scope
    lifecycle, gen, body = ctx.responses, call.gen, call.body
    stored, background, stream = body.store is not False, bool(body.background), bool(body.stream)
    note(scope, applicable(plan, generated=True, stream=stream))
    headers = answer_headers(gen, opened.by)
    now = ctx.clock.now()
    created_at = int(now)
    own = codec.conversation(body)
    mcp = await mcp_tool.opening(prepared, opened)  # an mcp tool's items open the answer
    for n in itertools.count():  # the request's first id not taken by a stored response
        salt = gen.canonical if n == 0 else gen.canonical + f"#{n}".encode()
        answered = prepared.call.profile.answered_model(body.model)
        turn = Turn(seeding.make_id("resp_", salt, gen.seed), created_at, body, stored, answered)
        narrator = mcp_tool.narrating(ResponseNarrator(turn, ctx.clock), mcp)
        record = Record(
            id=turn.id,
            response=narrator.snapshot("queued" if background else "in_progress"),
            input_items=codec.input_items(body, turn.id),
            messages=prepared.options.history + own,
            background=background,
            stream=stream,
        )
        if not stored or await lifecycle.store.create(record):
            break

    async def source() -> AsyncIterator[Event]:
        events: AsyncIterator[Event] = opened.events()
        return events

    conversation = codec.conversation_id(body)
    on_end = None if conversation is None else conversations.appender(ctx, conversation, record.input_items)
    run = Run(turn.id, narrator, source, background, stored, now, on_end)
    link = Link()
    framing = Framing(named=True, done=False, style=call.profile.error_style)
    faults = stream_faults(plan, link)
    if background:
        lifecycle.spawn(run)
        if stream:
            return event_stream(lifecycle.follow(turn.id, -1), framing, headers, faults, link)
        return _json(record.response, headers)
    if stream:
        return event_stream(lifecycle.run(run), framing, headers, faults, link)
    try:
        final = await unless_gone(prepared.request.receive, _last_snapshot(lifecycle.run(run), record.response))
    except ClientGone:
        return abandoned(scope)  # the run's own finally has stored it cancelled, as a stream's does
    return _json(final, headers)


async def _last_snapshot(events: AsyncIterator[Json], first: Json) -> Json:
    """The response as the last event that carries one says (a foreground run folded)."""
    final = first
    try:
        async for event in events:
            final = event.get("response", final)
    finally:
        await aclose(events)  # at once, not at garbage collection: a cancelled run is stored so now
    return final


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
    lifecycle = _lifecycle(request)
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
    ctx: ServerContext = request.app.state.ctx
    link = Link()
    plan = planned(request.scope)
    note(request.scope, applicable(plan, generated=False, stream=True))
    framing = Framing(named=True, done=False, style=ctx.profile_of(request.scope).error_style)
    return event_stream(lifecycle.follow(record.id, after), framing, {}, stream_faults(plan, link), link)


async def cancel(request: Request) -> Response:
    lifecycle = _lifecycle(request)
    return _json((await lifecycle.cancel(request.path_params["response_id"])).response)


async def delete(request: Request) -> Response:
    lifecycle = _lifecycle(request)
    response_id = request.path_params["response_id"]
    await lifecycle.delete(response_id)
    return _json({"id": response_id, "object": "response", "deleted": True})


async def list_input_items(request: Request) -> Response:
    lifecycle = _lifecycle(request)
    record = await lifecycle.get(request.path_params["response_id"])
    limit = _int(request, "limit", 20)
    assert limit is not None
    if not 1 <= limit <= 100:
        raise params.invalid("limit", "must be between 1 and 100.")
    order = request.query_params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise params.invalid("order", f"'{order}' is not one of asc, desc.")
    after = request.query_params.get("after")
    items = params.listed(record.input_items, order, after, "input item '{after}' in this response")
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
    """Tokens the model would read: the rendered conversation, counted by the shipped tokenizer
    exactly as a generation counts its prompt (no model needed)."""
    ctx: ServerContext = request.app.state.ctx
    profile = ctx.profile_of(request.scope)
    _, data = await json_body(request)
    # Only extra_body is lifted: no profile documents Responses fields yet, so none are dropped.
    data = params.prepare(data, profile, "chat", strict=False)
    body = validated(InputTokensRequest, data)
    history = await _continued(ctx, body)
    turns = codec.messages(body.instructions, history + codec.conversation(body), codec.image_costs(body))
    window = ctx.options.models.context_window(body.model, profile)
    gen = GenerationRequest("chat", body.model, (Prompt(messages=turns),), 1, _COUNT, 0, window)
    counted = sum(p.size for p in await prompts.prepare_off_loop(gen, Tokenizer.shipped()))
    return _json({"object": "response.input_tokens", "input_tokens": counted})


_COUNT = Sampling(temperature=0.0, max_tokens=1)  # room for one token: the window is checked as a generation's
FAMILY = Family(codec.CODEC, deliver, prelude, eager=lambda data: data.get("background") is True)


async def create(request: Request) -> Response:
    return await handle(request, FAMILY)


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/responses", create, methods=["POST"]),
        Route("/v1/responses/input_tokens", input_tokens, methods=["POST"]),
        Route("/v1/responses/{response_id}", retrieve, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/cancel", cancel, methods=["POST"]),
        Route("/v1/responses/{response_id}/input_items", list_input_items, methods=["GET"]),
    ]
