"""The Batch API over the runner: create, retrieve, list, cancel.

A cancel is a key of its own (``batches:cancel:<id>``), written by whichever process is asked,
never the record (which only its owner writes): the batch reads as ``cancelling`` from that
moment, its owner sees the key (at once in this process, at its next step elsewhere), and it
ends ``cancelled`` with the output of the lines that ran. A finished batch cannot be cancelled
(409), as OpenAI answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from mockserver.batches.record import KEYS, TERMINAL, new_record
from mockserver.batches.runner import Runner
from mockserver.errors import APIError, InvalidRequest
from mockserver.files.store import page_of, public
from mockserver.spine.seeding import digest
from mockserver.wire.json import Json

__all__ = ["Batches", "Conflict"]


class Conflict(APIError):
    status = 409
    type = "invalid_request_error"


class Batches(Runner):
    async def create(
        self,
        input_file_id: str,
        endpoint: str,
        metadata: Json | None,
        headers: Sequence[tuple[bytes, bytes]],
        expire_after: int | None = None,
    ) -> Json:
        file = await self.files.get(input_file_id, param="input_file_id")
        if file["purpose"] != "batch":
            raise InvalidRequest(
                f"Invalid value for 'input_file_id': file {input_file_id} has purpose '{file['purpose']}', "
                "not 'batch'.",
                param="input_file_id",
            )
        seq = await self.state.add(KEYS.seq)
        batch_id = "batch_" + digest(input_file_id, endpoint, metadata, seq).hex()[:24]
        record = new_record(batch_id, input_file_id, endpoint, metadata, headers, self.clock.now(), seq)
        record["_expire_after"] = expire_after
        await self._write(record)
        await self.state.map_put(KEYS.index, batch_id, b"1")
        self._spawn(batch_id)
        return public(record)

    async def get(self, batch_id: str) -> Json:
        return public(await self._view(await self._load(batch_id)))

    async def page(self, limit: int, after: str | None) -> tuple[list[Json], bool]:
        found = []
        for batch_id in await self.state.map_all(KEYS.index):
            raw = await self.state.get(KEYS.record(batch_id))
            if raw is not None:
                found.append(await self._view(json.loads(raw)))
        return page_of(found, limit, "desc", after, "batch")

    async def cancel(self, batch_id: str) -> Json:
        record = await self._view(await self._load(batch_id))
        if record["status"] in ("cancelling", "cancelled"):
            return public(record)
        if record["status"] in TERMINAL:
            raise Conflict(
                f"Cannot cancel batch {batch_id}: it is already {record['status']}.",
                param="batch_id",
                code="batch_not_cancellable",
            )
        await self.state.put(KEYS.cancel(batch_id), str(int(self.clock.now())).encode())
        wake = self._wake.get(batch_id)
        if wake is not None:
            wake.set()
        return await self.get(batch_id)
