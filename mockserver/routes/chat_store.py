"""Stored chat completions (``store: true``): list, retrieve, update metadata, delete, and
list a completion's request messages.

A chat completion is kept by :func:`remember` once it is whole, in its non-streamed form
(a streamed one as the fold of its events), with the request's ``metadata`` and
``messages``. It lives in the Responses store as a record of kind ``chat.completion``, so
``--store sqlite:PATH`` shares it between server processes just as it shares responses.

Chat completion ids derive from the request and its seed, so the same request asked again
gets the same id: the later answer replaces the earlier one (and counts as created later).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal, get_args

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest, NotFound
from mockserver.http.body import json_body
from mockserver.lifecycle.runs import Lifecycle
from mockserver.routes import params
from mockserver.state.records import Query, Record, RecordKind, Store
from mockserver.wire.json import Json, dumps

__all__ = ["remember", "routes"]

log = logging.getLogger("mockserver")

KIND: RecordKind = "chat.completion"
Order = Literal["asc", "desc"]

# OpenAI's limits on metadata: pairs, key length, value length.
MAX_PAIRS, MAX_KEY, MAX_VALUE = 16, 64, 512


async def remember(lifecycle: Lifecycle, completion: dict[str, Any], request_body: dict[str, Any]) -> None:
    """Keep ``completion`` (the body the client got, non-streamed form) if the request said
    ``store: true``. Never raises: the answer is already on its way, and a store that fails
    must not turn it into an error (the log says what happened)."""
    if request_body.get("store") is not True:
        return
    completion_id, metadata = str(completion.get("id")), request_body.get("metadata")
    store = lifecycle.store
    try:
        record = Record(
            id=completion_id,
            response={**completion, "metadata": dict(metadata) if isinstance(metadata, dict) else {}},
            input_items=_messages(completion_id, request_body.get("messages") or []),
            messages=(),
            kind=KIND,
        )
        await store.delete(completion_id, KIND)  # the same request again: the later answer is kept
        await store.create(record)
    except Exception:
        log.exception("could not store chat completion %s", completion_id)


def _messages(completion_id: str, messages: Sequence[Any]) -> tuple[Json, ...]:
    """The request's messages as the messages list shows them: text ``content`` (parts
    joined), and the parts themselves as ``content_parts`` when they were sent as parts."""
    shown: list[Json] = []
    for i, message in enumerate(m for m in messages if isinstance(m, dict)):
        content = message.get("content")
        parts = content if isinstance(content, list) else None
        if parts is not None:
            content = "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")
        item: Json = {
            "id": f"{completion_id}-{i}",
            "role": message.get("role"),
            "content": content,
            "name": message.get("name"),
            "content_parts": parts,
        }
        for key in ("tool_calls", "tool_call_id"):  # an assistant's calls, a tool's answer
            if message.get(key) is not None:
                item[key] = message[key]
        shown.append(item)
    return tuple(shown)


# ---- reading the request -----------------------------------------------------------------


def _store(request: Request) -> Store:
    ctx: ServerContext = request.app.state.ctx
    return ctx.responses.store


async def _get(store: Store, completion_id: str) -> Record:
    record = await store.get(completion_id, KIND)
    if record is None:
        raise NotFound(f"No chat completion found with id '{completion_id}'.", param="completion_id")
    return record


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", "20")
    try:
        limit = int(raw)
    except ValueError:
        raise params.invalid("limit", f"'{raw}' is not an integer.") from None
    if not 1 <= limit <= 100:
        raise params.invalid("limit", f"{limit} is not between 1 and 100.")
    return limit


def _order(request: Request) -> Order:
    order = request.query_params.get("order", "asc")  # chat completions list oldest first
    if order not in get_args(Order):
        raise params.invalid("order", f"'{order}' is not one of {', '.join(get_args(Order))}.")
    return "asc" if order == "asc" else "desc"


def _metadata_filter(request: Request) -> tuple[tuple[str, str], ...]:
    """``metadata[key]=value`` query parameters (OpenAPI's deepObject style)."""
    pairs: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name == "metadata":
            raise params.invalid("metadata", "filter by metadata as metadata[key]=value.")
        if name.startswith("metadata[") and name.endswith("]"):
            pairs[name[len("metadata[") : -1]] = value
    return tuple(pairs.items())


def _metadata(value: Any) -> dict[str, str]:
    """A metadata object as OpenAI limits it (``null`` clears it)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequest(
            f"Invalid type for 'metadata': expected an object, but got {_a(value)} instead.",
            param="metadata",
        )
    if len(value) > MAX_PAIRS:
        raise InvalidRequest(
            f"Invalid 'metadata': too many properties. Expected an object with at most {MAX_PAIRS} properties, "
            f"but got an object with {len(value)} properties instead.",
            param="metadata",
        )
    for key, item in value.items():
        if len(key) > MAX_KEY:
            raise InvalidRequest(
                f"Invalid 'metadata': key '{key[:MAX_KEY]}…' is too long. Expected a key with at most "
                f"{MAX_KEY} characters, but got one with {len(key)} characters instead.",
                param="metadata",
            )
        if not isinstance(item, str):
            raise InvalidRequest(
                f"Invalid type for 'metadata.{key}': expected a string, but got {_a(item)} instead.",
                param=f"metadata.{key}",
            )
        if len(item) > MAX_VALUE:
            raise InvalidRequest(
                f"Invalid 'metadata.{key}': string too long. Expected a string with maximum length {MAX_VALUE}, "
                f"but got a string with length {len(item)} instead.",
                param=f"metadata.{key}",
            )
    return dict(value)


def _a(value: Any) -> str:
    """A JSON value's type, as OpenAI's messages name it."""
    if isinstance(value, bool):
        return "a boolean"
    kinds = {str: "a string", int: "an integer", float: "a number", list: "an array", dict: "an object"}
    return kinds.get(type(value), "null")


def _json(body: Any) -> Response:
    return Response(dumps(body), media_type="application/json")


def _list(data: Sequence[Json], has_more: bool) -> Response:
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    return _json({"object": "list", "data": list(data), "first_id": first, "last_id": last, "has_more": has_more})


# ---- handlers ----------------------------------------------------------------------------


async def list_completions(request: Request) -> Response:
    query = Query(
        kind=KIND,
        model=request.query_params.get("model"),
        metadata=_metadata_filter(request),
        after=request.query_params.get("after"),
        limit=_limit(request),
        order=_order(request),
    )
    page = await _store(request).find(query)
    if page is None:
        raise params.invalid("after", f"no stored chat completion '{query.after}'.")
    return _list([r.response for r in page.records], page.has_more)


async def retrieve(request: Request) -> Response:
    return _json((await _get(_store(request), request.path_params["completion_id"])).response)


async def update(request: Request) -> Response:
    """Only ``metadata`` may change; it is replaced as a whole."""
    store, completion_id = _store(request), request.path_params["completion_id"]
    _, body = await json_body(request)
    extra = sorted(set(body) - {"metadata"})
    if extra:
        raise InvalidRequest(
            f"Unrecognized request argument supplied: {extra[0]}. Only 'metadata' can be modified.", param=extra[0]
        )
    if "metadata" not in body:
        raise InvalidRequest("Missing required parameter: 'metadata'.", param="metadata")
    metadata = _metadata(body["metadata"])
    record = await _get(store, completion_id)
    changed = {**record.response, "metadata": metadata}
    if not await store.rewrite(completion_id, changed, KIND):  # deleted (or expired) meanwhile
        raise NotFound(f"No chat completion found with id '{completion_id}'.", param="completion_id")
    return _json(changed)


async def delete(request: Request) -> Response:
    completion_id = request.path_params["completion_id"]
    if not await _store(request).delete(completion_id, KIND):
        raise NotFound(f"No chat completion found with id '{completion_id}'.", param="completion_id")
    return _json({"object": "chat.completion.deleted", "id": completion_id, "deleted": True})


async def list_messages(request: Request) -> Response:
    record = await _get(_store(request), request.path_params["completion_id"])
    limit, order = _limit(request), _order(request)
    after = request.query_params.get("after")
    items = params.listed(record.input_items, order, after, "message '{after}' in this chat completion")
    return _list(items[:limit], len(items) > limit)


def routes() -> list[BaseRoute]:
    # POST /v1/chat/completions (create) is the chat route's; a Route per method keeps
    # Starlette's 405 for the methods neither takes.
    return [
        Route("/v1/chat/completions", list_completions, methods=["GET"]),
        Route("/v1/chat/completions/{completion_id}", retrieve, methods=["GET"]),
        Route("/v1/chat/completions/{completion_id}", update, methods=["POST"]),
        Route("/v1/chat/completions/{completion_id}", delete, methods=["DELETE"]),
        Route("/v1/chat/completions/{completion_id}/messages", list_messages, methods=["GET"]),
    ]
