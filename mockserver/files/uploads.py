"""Uploads: a large file sent in parts, then completed into a File.

An Upload names the file's size, purpose and MIME type up front; parts (each a request body)
are kept on the State as they come; ``complete`` joins the parts in the order ``part_ids``
gives, checks the byte count (and the MD5, when given) against what was announced, and makes
a File of them — only then is anything visible as a File, so a failed completion leaves the
Upload pending, to be completed again or cancelled. An Upload expires an hour after it is
created (on the server's clock), as OpenAI's do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence

from mockserver.clock import Clock
from mockserver.errors import InvalidRequest, NotFound
from mockserver.files.store import FileStore, public
from mockserver.spine.seeding import digest
from mockserver.state.base import State
from mockserver.wire.json import Json

__all__ = ["UPLOAD_TTL", "Uploads"]

UPLOAD_TTL = 3600  # seconds an Upload stays pending
_UPLOAD = "uploads:obj:"
_PART = "uploads:part:"
_PARTS = "uploads:parts:"  # a map per upload: part id → its size
_SEQ = "uploads:seq"

# What the completed bytes (and their purpose) must pass before they become a File: the
# route's rule for batch files, which this floor does not know.
Check = Callable[[bytes, str], Awaitable[None]]


class Uploads:
    def __init__(self, state: State, clock: Clock, files: FileStore) -> None:
        self.state = state
        self.clock = clock
        self.files = files

    async def create(self, filename: str, purpose: str, size: int, mime_type: str) -> Json:
        if size > self.files.max_bytes:
            raise InvalidRequest(
                f"Invalid value for 'bytes': {size} is over this server's limit of "
                f"{self.files.max_bytes} bytes (--max-file-bytes).",
                param="bytes",
            )
        seq = await self.state.add(_SEQ)
        now = int(self.clock.now())
        upload_id = "upload_" + digest(filename, purpose, size, mime_type, seq).hex()[:24]
        obj: Json = {
            "id": upload_id,
            "object": "upload",
            "bytes": size,
            "created_at": now,
            "expires_at": now + UPLOAD_TTL,
            "filename": filename,
            "purpose": purpose,
            "status": "pending",
            "file": None,
            "_mime_type": mime_type,
        }
        await self._write(obj)
        return public(obj)

    async def _get(self, upload_id: str) -> Json:
        raw = await self.state.get(_UPLOAD + upload_id)
        if raw is None:
            raise NotFound(f"No such Upload object: {upload_id}", param="upload_id")
        obj: Json = json.loads(raw)
        if obj["status"] == "pending" and self.clock.now() >= obj["expires_at"]:
            obj["status"] = "expired"
            await self._write(obj)
            await self._forget_parts(upload_id)
        return obj

    async def _pending(self, upload_id: str, doing: str) -> Json:
        obj = await self._get(upload_id)
        if obj["status"] != "pending":
            raise InvalidRequest(
                f"Cannot {doing} Upload {upload_id}: it is {obj['status']}, not pending.", param="upload_id"
            )
        return obj

    async def add_part(self, upload_id: str, data: bytes) -> Json:
        await self._pending(upload_id, "add a part to")
        seq = await self.state.add(_SEQ)
        part_id = "part_" + digest(upload_id, hashlib.sha256(data).digest(), seq).hex()[:24]
        await self.state.put(_PART + part_id, data)
        await self.state.map_put(_PARTS + upload_id, part_id, str(len(data)).encode())
        return {"id": part_id, "object": "upload.part", "created_at": int(self.clock.now()), "upload_id": upload_id}

    async def complete(self, upload_id: str, part_ids: Sequence[str], md5: str | None, check: Check) -> Json:
        """Join the parts in ``part_ids`` order into a File (``check`` judges its bytes first)."""
        obj = await self._pending(upload_id, "complete")
        sizes = await self.state.map_all(_PARTS + upload_id)
        unknown = [p for p in part_ids if p not in sizes]
        if unknown:
            raise InvalidRequest(
                f"Invalid value for 'part_ids': {unknown[0]} is not a part of Upload {upload_id}.", param="part_ids"
            )
        if len(set(part_ids)) != len(part_ids):
            raise InvalidRequest("Invalid value for 'part_ids': a part is listed twice.", param="part_ids")
        total = sum(int(sizes[p]) for p in part_ids)
        if total != obj["bytes"]:
            raise InvalidRequest(
                f"The parts hold {total} bytes, but the Upload was created for {obj['bytes']} bytes.",
                param="bytes",
            )
        chunks = []
        for part_id in part_ids:
            data = await self.state.get(_PART + part_id)
            if data is None:
                raise NotFound(f"Part {part_id} of Upload {upload_id} is gone.", param="part_ids")
            chunks.append(data)
        data = b"".join(chunks)
        if md5 is not None and hashlib.md5(data, usedforsecurity=False).hexdigest() != md5.lower():
            raise InvalidRequest(
                "Invalid value for 'md5': it does not match the MD5 of the uploaded bytes.", param="md5"
            )
        await check(data, obj["purpose"])
        file = await self.files.create(data, obj["filename"], obj["purpose"], param="part_ids")
        obj.update(status="completed", file=file)
        await self._write(obj)
        await self._forget_parts(upload_id)
        return public(obj)

    async def cancel(self, upload_id: str) -> Json:
        obj = await self._pending(upload_id, "cancel")
        obj["status"] = "cancelled"
        await self._write(obj)
        await self._forget_parts(upload_id)
        return public(obj)

    async def _forget_parts(self, upload_id: str) -> None:
        for part_id in await self.state.map_all(_PARTS + upload_id):
            await self.state.delete(_PART + part_id)
        await self.state.forget(_PARTS + upload_id)

    async def _write(self, obj: Json) -> None:
        await self.state.put(_UPLOAD + obj["id"], json.dumps(obj, separators=(",", ":")).encode())
