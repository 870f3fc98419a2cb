"""``/v1/conversations``: create, retrieve, update (metadata), delete; and a conversation's
items: create, list (``order``, ``after``, ``limit``), retrieve, delete.

A ``POST /v1/responses`` with ``conversation`` reads the conversation's items as the history
the model answers from (:func:`history`) and, once the response is completed or incomplete,
appends its input and output items (:func:`appender`, called by the lifecycle before the
closing event goes out, so a client that has the answer finds the items). Everything is kept
on the server's state (:class:`~mockserver.state.conversations.ConversationStore`), shared by a
fleet. Ids are deterministic: a conversation's from the global seed, the session and the
creating body (the first one free), an item's from its conversation and position — the same
sequence of requests on a fresh server makes the same ids and the same answers.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.context import Conversation, ServerContext
from mockserver.errors import NotFound
from mockserver.http.body import json_body
from mockserver.routes import params
from mockserver.routes.responses import codec
from mockserver.schemas.common import refuse_unencodable, validated
from mockserver.schemas.conversations import CreateConversation, CreateItems, UpdateConversation
from mockserver.schemas.responses import InputItem
from mockserver.spine.seeding import canonical, digest
from mockserver.state.conversations import ConversationStore
from mockserver.wire.json import Json, dumps

__all__ = ["appender", "history", "routes"]

_M = TypeVar("_M", bound=BaseModel)
_ITEM = TypeAdapter[InputItem](InputItem)
_PREFIXES = {"message": "msg_", "function_call": "fc_", "function_call_output": "fco_"}


def _json(body: Any) -> Response:
    return Response(dumps(body), media_type="application/json")


def _store(request: Request) -> ConversationStore:
    ctx: ServerContext = request.app.state.ctx
    return ConversationStore(ctx.state)


def _fresh_id(conversation_id: str) -> Callable[[Json, int], str]:
    """An item's id from its conversation and position (``msg_…``, ``fc_…``, ``fco_…``)."""

    def fresh(item: Json, position: int) -> str:
        return codec.item_id(_PREFIXES.get(str(item.get("type")), "item_"), conversation_id, position)

    return fresh


def _entries(items: Sequence[InputItem]) -> list[Json]:
    """Input items as the conversation keeps them: an id the client gave is kept, else the
    store gives one by position."""
    out = []
    for item in items:
        _, entry = codec.listed_item(item)
        out.append({"id": item.id, **entry} if item.id else entry)
    return out


async def _read(request: Request, model: type[_M]) -> _M:
    """The body as ``model``; a 400 naming the field that holds no valid Unicode (nothing that
    cannot be written to the state is ever taken)."""
    data = (await json_body(request))[1] if (await request.body()).strip() else {}  # a body may be left out
    refuse_unencodable(data, "")
    return validated(model, data)


async def _conversation(store: ConversationStore, conversation_id: str, param: str = "conversation_id") -> Json:
    found = await store.get(conversation_id)
    if found is None:
        raise NotFound(f"Conversation with id '{conversation_id}' not found.", param=param)
    return found


def _candidates(ctx: ServerContext, session: str | None, body: bytes) -> Iterator[str]:
    for n in itertools.count():
        yield "conv_" + digest(b"conversation", ctx.seed, session, body, n).hex()[:48]


async def create(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    body = await _read(request, CreateConversation)
    store = _store(request)
    session = request.headers.get("x-mockserver-session")
    created = int(ctx.clock.now())
    obj = await store.create(
        _candidates(ctx, session, canonical(body.model_dump(mode="json"))), created, body.metadata or {}
    )
    if body.items:
        await store.append(obj["id"], _entries(body.items), _fresh_id(obj["id"]))
    return _json(obj)


async def retrieve(request: Request) -> Response:
    return _json(await _conversation(_store(request), request.path_params["conversation_id"]))


async def update(request: Request) -> Response:
    body = await _read(request, UpdateConversation)
    store, conversation_id = _store(request), request.path_params["conversation_id"]
    updated = await store.update(conversation_id, body.metadata)
    if updated is None:
        await _conversation(store, conversation_id)  # the 404
    return _json(updated)


async def delete(request: Request) -> Response:
    conversation_id = request.path_params["conversation_id"]
    if not await _store(request).delete(conversation_id):
        raise NotFound(f"Conversation with id '{conversation_id}' not found.", param="conversation_id")
    return _json({"id": conversation_id, "object": "conversation.deleted", "deleted": True})


def _page(items: list[Json], limit: int) -> Json:
    page = items[:limit]
    return {
        "object": "list",
        "data": page,
        "has_more": len(items) > limit,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
    }


async def create_items(request: Request) -> Response:
    store, conversation_id = _store(request), request.path_params["conversation_id"]
    body = await _read(request, CreateItems)
    await _conversation(store, conversation_id)
    added = await store.append(conversation_id, _entries(body.items), _fresh_id(conversation_id))
    return _json(_page(added, len(added)))


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", "20")
    try:
        limit = int(raw)
    except ValueError:
        raise params.invalid("limit", f"'{raw}' is not an integer.") from None
    if not 1 <= limit <= 100:
        raise params.invalid("limit", "must be between 1 and 100.")
    return limit


async def list_items(request: Request) -> Response:
    store, conversation_id = _store(request), request.path_params["conversation_id"]
    limit = _limit(request)
    order = request.query_params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise params.invalid("order", f"'{order}' is not one of asc, desc.")
    await _conversation(store, conversation_id)
    after = request.query_params.get("after")
    items = params.listed(await store.items(conversation_id), order, after, "item '{after}' in this conversation")
    return _json(_page(items, limit))


async def _item(request: Request) -> tuple[ConversationStore, str, str]:
    store, conversation_id = _store(request), request.path_params["conversation_id"]
    await _conversation(store, conversation_id)
    return store, conversation_id, request.path_params["item_id"]


async def retrieve_item(request: Request) -> Response:
    store, conversation_id, item_id = await _item(request)
    found = await store.item(conversation_id, item_id)
    if found is None:
        raise NotFound(f"Item with id '{item_id}' not found.", param="item_id")
    return _json(found)


async def delete_item(request: Request) -> Response:
    store, conversation_id, item_id = await _item(request)
    if not await store.delete_item(conversation_id, item_id):
        raise NotFound(f"Item with id '{item_id}' not found.", param="item_id")
    return _json(await _conversation(store, conversation_id))


# ---- the Responses API's side ---------------------------------------------------------------


async def history(ctx: ServerContext, conversation_id: str) -> Conversation:
    """What the model reads of the conversation so far (a 404 naming ``conversation`` if there
    is none). Items the model reads nothing of (reasoning, searches) are left out."""
    store = ConversationStore(ctx.state)
    await _conversation(store, conversation_id, param="conversation")
    read = []
    for stored in await store.items(conversation_id):
        try:
            read.append(_ITEM.validate_python(stored))
        except ValidationError:  # an output item no input reads (none of ours): nothing to say
            continue
    return codec.turns(read)


def appender(ctx: ServerContext, conversation_id: str, inputs: Sequence[Json]) -> Callable[[Json], Awaitable[None]]:
    """What a response's run calls when it ends: its input and output items, appended."""
    store = ConversationStore(ctx.state)

    async def append(response: Json) -> None:
        if await store.get(conversation_id) is None:  # deleted while the response ran: nothing to keep
            return
        await store.append(conversation_id, [*inputs, *response.get("output", [])], _fresh_id(conversation_id))

    return append


def routes() -> list[BaseRoute]:
    one, items = "/v1/conversations/{conversation_id}", "/v1/conversations/{conversation_id}/items"
    return [
        Route("/v1/conversations", create, methods=["POST"]),
        Route(one, retrieve, methods=["GET"]),
        Route(one, update, methods=["POST"]),
        Route(one, delete, methods=["DELETE"]),
        Route(items, create_items, methods=["POST"]),
        Route(items, list_items, methods=["GET"]),
        Route(items + "/{item_id}", retrieve_item, methods=["GET"]),
        Route(items + "/{item_id}", delete_item, methods=["DELETE"]),
    ]
