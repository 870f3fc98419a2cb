"""Message threads (the beta ``thread`` field the 2.x SDK's tool runner and
``client.beta.messages.thread()`` send): the server holds the conversation between turns, so
each turn sends only its new messages.

``thread: {"type": "create"}`` answers as any create, then keeps the conversation (the request's
fields, its messages and the reply) under the reply's id. ``thread: {"type": "continue",
"previous_message_id": …}`` is read as the kept conversation with this turn's messages appended
and this turn's fields over the kept ones, then kept in turn under its own reply's id. A
``previous_message_id`` nobody kept is Anthropic's 404 with ``error.details.error_code:
"thread_not_found"``, which the SDK answers by sending the whole history again under a new thread.

Threads live in the server's state (``--state``), so every process of a fleet continues them,
for :data:`TTL` seconds. The conversation the handler reads is the whole one: the seed, the
scripted rules and the tool policy see what an unthreaded request with the same history sees.
"""

from __future__ import annotations

import json
from typing import Any

from mockserver.context import ServerContext
from mockserver.errors import ErrorStyle, InvalidRequest, NotFound
from mockserver.wire.json import Json, dumps

__all__ = ["TTL", "ThreadNotFound", "keep", "resolve", "threaded"]

KEY = "anthropic:thread:"
TTL = 7 * 24 * 3600.0  # seconds a kept thread can be continued
_TURN_ONLY = frozenset({"thread", "messages", "stream"})  # never kept as the thread's fields


class ThreadNotFound(NotFound):
    """A ``previous_message_id`` with no kept thread: the SDK recovers by replaying the history."""

    def __init__(self, message_id: str) -> None:
        super().__init__(f"thread.previous_message_id: no thread continues from '{message_id}'", param="thread")

    def body(self, style: ErrorStyle = "openai") -> dict[str, Any]:
        found = super().body(style)
        if style == "anthropic":
            found["error"]["details"] = {"error_code": "thread_not_found"}
        return found


def threaded(data: Json) -> bool:
    """Does the body ask for a thread (to be kept once answered)?"""
    return isinstance(data.get("thread"), dict)


def _previous(data: Json) -> str | None:
    """The id a ``continue`` turn continues from (None: a ``create``)."""
    thread = data["thread"]
    kind = thread.get("type")
    if kind == "create":
        return None
    if kind != "continue":
        raise InvalidRequest("thread.type: Input should be 'create' or 'continue'", param="thread.type")
    previous = thread.get("previous_message_id")
    if not isinstance(previous, str) or not previous:
        raise InvalidRequest("thread.continue.previous_message_id: Field required", param="thread.previous_message_id")
    return previous


async def resolve(ctx: ServerContext, data: Json) -> Json | None:
    """The whole body a ``continue`` turn stands for (None: nothing to add, a ``create``)."""
    previous = _previous(data)
    if previous is None:
        return None
    kept = await ctx.state.get(KEY + previous)
    if kept is None:
        raise ThreadNotFound(previous)
    thread = json.loads(kept)
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise InvalidRequest("messages: Input should be a valid list", param="messages")
    turn = {k: v for k, v in data.items() if k != "messages"}
    return {**thread["fields"], **turn, "messages": [*thread["messages"], *messages]}


async def keep(ctx: ServerContext, data: Json, reply: Json) -> None:
    """Keep the conversation ``data`` had, with ``reply`` after it, under the reply's id."""
    fields = {k: v for k, v in data.items() if k not in _TURN_ONLY}
    messages = [*data.get("messages", []), {"role": "assistant", "content": reply["content"]}]
    await ctx.state.put(KEY + str(reply["id"]), dumps({"fields": fields, "messages": messages}), ttl=TTL)
