"""The file store on a State: ids from what was uploaded, expiry and listing on the server's
clock, output files written over by id, and nothing listed whose bytes are not there."""

from __future__ import annotations

import asyncio

import pytest

from mockserver.clock import VirtualClock
from mockserver.errors import InvalidRequest, NotFound
from mockserver.files.store import FileStore
from mockserver.state.memory import MemoryState


def test_files_on_a_state() -> None:
    async def scenario() -> None:
        clock = VirtualClock(1000.0)
        state = MemoryState()
        store = FileStore(state, clock, max_bytes=10)
        first = await store.create(b"abc", "a.txt", "user_data")
        again = await FileStore(MemoryState(), clock, 10).create(b"abc", "a.txt", "user_data")
        assert first["id"] == again["id"]  # the same upload on a fresh State: the same id
        second = await store.create(b"abc", "a.txt", "user_data")
        assert second["id"] != first["id"]
        short = await store.create(b"x", "s.txt", "assistants", expires_after=3600)
        data, more = await store.page(None, 2, "asc", None)
        assert [f["id"] for f in data] == [first["id"], second["id"]] and more
        assert [f["id"] for f in (await store.page("assistants", 10, "desc", None))[0]] == [short["id"]]
        with pytest.raises(NotFound):
            await store.page(None, 10, "asc", "file-nope")
        clock.advance(3600)
        assert not await store.exists(short["id"])
        assert await state.get("files:bytes:" + short["id"]) is None  # its bytes went with it
        with pytest.raises(InvalidRequest):
            await store.create(b"x" * 11, "big.bin", "user_data")
        over = await store.create(b"new", "o.jsonl", "batch_output", file_id=first["id"])
        assert over["id"] == first["id"] and await store.content(first["id"]) == b"new"
        assert (await store.delete(first["id"]))["deleted"]
        with pytest.raises(NotFound):
            await store.content(first["id"])

    asyncio.run(scenario())
