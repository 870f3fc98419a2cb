"""Conversations (OpenAI's ``/v1/conversations``) kept on the state's primitives, so a fleet
on one SQLite file or one Redis shares them like every other piece of state.

A conversation is three keys, all under ``conversations:`` (so a reset is one
:meth:`~mockserver.state.base.State.forget`):

* ``conversations:c:<id>`` — the Conversation object (its ``metadata`` rewritten whole by an
  update, as the API's update replaces it whole);
* ``conversations:c:<id>:items`` — a map, item id → ``{"at": position, "item": …}``;
* ``conversations:c:<id>:next`` — a counter: an append takes its positions with one atomic
  :meth:`~mockserver.state.base.State.add`, so appends from several processes never share a
  position, and the items list in the order their positions were taken.

An id is claimed with ``conversations:claim:<id>``, a counter: the creator that counts it to 1
owns the id (two processes never create the same conversation), and a deleted conversation's
claim stays, so an id is never handed out twice. Candidate ids come from the caller (derived
from the request), the first one free is taken: the same requests on a fresh server make the
same ids. Nothing here is a read-modify-write across processes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from mockserver.state.base import State
from mockserver.wire.json import Json

__all__ = ["ConversationStore"]

_ROOT = "conversations:"


def _object(key: str) -> str:
    return f"{_ROOT}c:{key}"


def _items(key: str) -> str:
    return f"{_ROOT}c:{key}:items"


def _next(key: str) -> str:
    return f"{_ROOT}c:{key}:next"


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class ConversationStore:
    """Conversations and their items on ``state`` (a view: it holds nothing of its own)."""

    def __init__(self, state: State) -> None:
        self.state = state

    async def create(self, candidates: Iterable[str], created_at: int, metadata: Mapping[str, str]) -> Json:
        """A new conversation under the first of ``candidates`` nobody has claimed."""
        for conversation_id in candidates:
            if await self.state.add(f"{_ROOT}claim:{conversation_id}") == 1:
                obj: Json = {
                    "id": conversation_id,
                    "object": "conversation",
                    "created_at": created_at,
                    "metadata": dict(metadata),
                }
                await self.state.put(_object(conversation_id), _dumps(obj))
                return obj
        raise RuntimeError("no free conversation id among the candidates")  # candidates are endless

    async def get(self, conversation_id: str) -> Json | None:
        raw = await self.state.get(_object(conversation_id))
        if raw is None:
            return None
        found: Json = json.loads(raw)
        return found

    async def update(self, conversation_id: str, metadata: Mapping[str, str]) -> Json | None:
        """The conversation with ``metadata`` in place of its own; None if there is none."""
        obj = await self.get(conversation_id)
        if obj is None:
            return None
        obj["metadata"] = dict(metadata)
        await self.state.put(_object(conversation_id), _dumps(obj))
        return obj

    async def delete(self, conversation_id: str) -> bool:
        """Forget the conversation and its items (its id stays claimed)."""
        if not await self.state.delete(_object(conversation_id)):
            return False
        await self.state.forget(_object(conversation_id) + ":")
        return True

    async def append(
        self, conversation_id: str, items: Sequence[Json], fresh_id: Callable[[Json, int], str]
    ) -> list[Json]:
        """Add ``items`` at the conversation's end, in order; an item whose ``id`` the
        conversation already holds (or that has none) gets ``fresh_id(item, position)``.
        Returns the items as kept."""
        if not items:
            return []
        end = await self.state.add(_next(conversation_id), len(items))
        taken = set(await self.state.map_all(_items(conversation_id)))
        kept, written = [], []
        for position, item in enumerate(items, start=end - len(items)):
            item_id = item.get("id")
            if not isinstance(item_id, str) or item_id in taken:
                item = {**item, "id": fresh_id(item, position)}
            taken.add(item["id"])
            written.append((item["id"], _dumps({"at": position, "item": item})))  # all encoded before any is written
            kept.append(item)
        for item_id, raw in written:
            await self.state.map_put(_items(conversation_id), item_id, raw)
        return kept

    async def items(self, conversation_id: str) -> list[Json]:
        """Every item, oldest first."""
        found = [json.loads(raw) for raw in (await self.state.map_all(_items(conversation_id))).values()]
        return [entry["item"] for entry in sorted(found, key=lambda entry: entry["at"])]

    async def item(self, conversation_id: str, item_id: str) -> Json | None:
        found = (await self.state.map_all(_items(conversation_id))).get(item_id)
        if found is None:
            return None
        item: Json = json.loads(found)["item"]
        return item

    async def delete_item(self, conversation_id: str, item_id: str) -> bool:
        return await self.state.map_delete(_items(conversation_id), item_id)

    async def clear(self) -> None:
        """Forget every conversation and every claim (``/__mockserver/reset``): a rerun then
        gets the ids a fresh server gives."""
        await self.state.forget(_ROOT)
