"""The conversation store on every state engine: ids claimed once across processes, appends
from two processes never sharing a position, items read back in order, deletes and a reset."""

from __future__ import annotations

import asyncio

from mockserver.state.base import State
from mockserver.state.conversations import ConversationStore
from mockserver.wire.json import Json
from tests.state.conftest import Reopen

CANDIDATES = ("conv_a", "conv_b", "conv_c")


def _fresh(item: Json, position: int) -> str:
    return f"item_{position}"


async def test_an_id_is_claimed_once_and_seen_by_every_process(state: State, reopen: Reopen) -> None:
    here, there = ConversationStore(state), ConversationStore(await reopen())
    first = await here.create(CANDIDATES, 100, {"topic": "demo"})
    assert first == {"id": "conv_a", "object": "conversation", "created_at": 100, "metadata": {"topic": "demo"}}
    assert (await there.create(CANDIDATES, 101, {}))["id"] == ("conv_b" if state.shared else "conv_a")
    if state.shared:
        assert await there.get("conv_a") == first
        assert (await there.update("conv_a", {"k": "v"}) or {})["metadata"] == {"k": "v"}
        assert (await here.get("conv_a") or {})["metadata"] == {"k": "v"}
    assert await here.update("conv_z", {}) is None and await here.get("conv_z") is None


async def test_appends_keep_their_order_and_never_share_a_position(state: State, reopen: Reopen) -> None:
    here = ConversationStore(state)
    there = ConversationStore(await reopen()) if state.shared else here
    await here.create(CANDIDATES, 1, {})

    async def add(store: ConversationStore, who: str) -> None:
        for n in range(5):
            await store.append("conv_a", [{"type": "message", "text": f"{who}{n}"}], _fresh)

    await asyncio.gather(add(here, "x"), add(there, "y"))
    items = await there.items("conv_a")
    assert sorted(item["id"] for item in items) == sorted(f"item_{n}" for n in range(10))
    assert [item["id"] for item in items] == [f"item_{n}" for n in range(10)]  # by position
    assert [i["text"] for i in items if i["text"][0] == "x"] == [f"x{n}" for n in range(5)]
    # An id the conversation holds already is not taken twice: the later item gets a fresh one.
    kept = await here.append("conv_a", [{"id": "item_0", "type": "message"}, {"id": "mine", "type": "message"}], _fresh)
    assert [item["id"] for item in kept] == ["item_10", "mine"]
    assert await here.item("conv_a", "mine") == {"id": "mine", "type": "message"}


async def test_deletes_and_a_reset(state: State) -> None:
    store = ConversationStore(state)
    await store.create(CANDIDATES, 1, {})
    await store.append("conv_a", [{"type": "message"}, {"type": "message"}], _fresh)
    assert await store.delete_item("conv_a", "item_0") and not await store.delete_item("conv_a", "item_0")
    assert [item["id"] for item in await store.items("conv_a")] == ["item_1"]
    assert await store.delete("conv_a") and not await store.delete("conv_a")
    assert await store.get("conv_a") is None and await store.items("conv_a") == []
    assert (await store.create(CANDIDATES, 2, {}))["id"] == "conv_b"  # a deleted id is never handed out again
    await store.clear()
    assert await store.get("conv_b") is None
    assert (await store.create(CANDIDATES, 3, {}))["id"] == "conv_a"  # after a reset: a fresh server's ids
