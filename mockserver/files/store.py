"""Files: their bytes and their File objects, kept on the State (memory, SQLite, Redis).

Every process of a fleet reads what any of them wrote, as with everything else the server
keeps. A file becomes visible only once whole: its bytes are written first, then its object,
then its entry in the listing; a delete goes the other way. A crash between two writes leaves
at worst bytes nobody can reach, never a File whose content is missing or cut.

Ids derive from what was uploaded (purpose, name, the bytes' digest): the same uploads on a
fresh server get the same ids. The same file uploaded twice takes the next free id of its
sequence, as a second upload to OpenAI is a second File. ``created_at`` reads the server's
clock (frozen under ``--frozen-time``); a file past its ``expires_at`` on that clock is gone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Literal

from mockserver.clock import Clock
from mockserver.errors import InvalidRequest, NotFound
from mockserver.spine.seeding import digest
from mockserver.state.base import State
from mockserver.wire.json import Json

__all__ = ["PURPOSES", "FileStore", "Page", "page_of"]

# What a client may upload for (CreateFileRequest); the server itself writes batch_output.
PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
_META = "files:meta:"
_BYTES = "files:bytes:"
_INDEX = "files:index"
_SEQ = "files:seq"

Page = tuple[list[Json], bool]


def page_of(found: Sequence[Json], limit: int, order: Literal["asc", "desc"], after: str | None, what: str) -> Page:
    """One page of ``found`` (each with ``created_at`` and a private ``_seq``), ``order`` by
    creation, starting past the object ``after`` names (a 404 if none does)."""
    ranked = sorted(found, key=lambda o: (o["created_at"], o["_seq"]), reverse=order == "desc")
    start = 0
    if after is not None:
        at = next((i for i, o in enumerate(ranked) if o["id"] == after), None)
        if at is None:
            raise NotFound(f"No {what} found with id '{after}'.", param="after")
        start = at + 1
    taken = ranked[start : start + limit + 1]
    return [public(o) for o in taken[:limit]], len(taken) > limit


def public(obj: Json) -> Json:
    """The object as the wire shows it: the private fields (``_…``) left out."""
    return {k: v for k, v in obj.items() if not k.startswith("_")}


class FileStore:
    """The files of one server (or fleet). ``max_bytes`` is the largest file (``--max-file-bytes``)."""

    def __init__(self, state: State, clock: Clock, max_bytes: int) -> None:
        self.state = state
        self.clock = clock
        self.max_bytes = max_bytes

    async def create(
        self,
        data: bytes,
        filename: str,
        purpose: str,
        expires_after: int | None = None,
        *,
        param: str = "file",
        file_id: str | None = None,
    ) -> Json:
        """Keep ``data`` as a File; ``expires_after`` seconds after creation it is gone. A given
        ``file_id`` is written over (a batch's output, written again by a resumed batch)."""
        if len(data) > self.max_bytes:
            raise InvalidRequest(
                f"Invalid value for '{param}': the file is {len(data)} bytes, over this server's "
                f"limit of {self.max_bytes} bytes (--max-file-bytes).",
                param=param,
                code="file_too_large",
            )
        sha = hashlib.sha256(data).digest()
        n = 0
        while file_id is None:
            candidate = "file-" + digest(purpose, filename, sha, n).hex()[:24]
            if await self.state.get(_META + candidate) is None:
                file_id = candidate
            n += 1
        now = int(self.clock.now())
        obj: Json = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": now,
            "expires_at": now + expires_after if expires_after is not None else None,
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "status_details": None,
            "_seq": await self.state.add(_SEQ),
        }
        raw = _dump(obj)
        await self.state.put(_BYTES + file_id, data)  # bytes first: an object never points at nothing
        await self.state.put(_META + file_id, raw)
        await self.state.map_put(_INDEX, file_id, raw)
        return public(obj)

    async def _find(self, file_id: str) -> Json | None:
        raw = await self.state.get(_META + file_id)
        if raw is None:
            return None
        obj: Json = json.loads(raw)
        expires = obj.get("expires_at")
        if expires is not None and self.clock.now() >= expires:
            await self._drop(file_id)
            return None
        return obj

    async def get(self, file_id: str, param: str = "file_id") -> Json:
        obj = await self._find(file_id)
        if obj is None:
            raise NotFound(f"No such File object: {file_id}", param=param)
        return public(obj)

    async def exists(self, file_id: str) -> bool:
        return await self._find(file_id) is not None

    async def content(self, file_id: str) -> bytes:
        """The exact bytes of the file."""
        await self.get(file_id)
        data = await self.state.get(_BYTES + file_id)
        if data is None:  # deleted between the two reads
            raise NotFound(f"No such File object: {file_id}", param="file_id")
        return data

    async def delete(self, file_id: str) -> Json:
        await self.get(file_id)
        await self._drop(file_id)
        return {"id": file_id, "object": "file", "deleted": True}

    async def _drop(self, file_id: str) -> None:
        await self.state.map_delete(_INDEX, file_id)  # out of the listing first, bytes last
        await self.state.delete(_META + file_id)
        await self.state.delete(_BYTES + file_id)

    async def page(self, purpose: str | None, limit: int, order: Literal["asc", "desc"], after: str | None) -> Page:
        now = self.clock.now()
        found = []
        for raw in (await self.state.map_all(_INDEX)).values():
            obj = json.loads(raw)
            if purpose is not None and obj["purpose"] != purpose:
                continue
            if obj.get("expires_at") is not None and now >= obj["expires_at"]:
                continue
            found.append(obj)
        return page_of(found, limit, order, after, "file")


def _dump(obj: Json) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()
