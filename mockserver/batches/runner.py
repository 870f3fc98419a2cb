"""The batch lifecycle: validating → in_progress → finalizing → completed, and its exits.

::

    validating ──▶ in_progress ──▶ finalizing ──▶ completed
        │               │               │
        └──▶ failed     └──▶ expired    └──▶ (cancel) cancelling ──▶ cancelled

Each batch is driven by one task of the process that owns it. Its lines go through the app
in process (:class:`~mockserver.batches.inprocess.InProcess`), one at a time through a small
shared gate (``concurrency`` lines of all batches at once), yielding the event loop between
lines: a 50,000-line batch runs beside interactive requests, never in front of them.

Each phase lasts at least ``step`` seconds of the server's clock (:func:`wait_until`), so on a
virtual clock (``--frozen-time``) a batch moves only when a test moves the clock, and every
status can be watched. ``expires_at`` (created + 24 h) reached first → ``expired``: the lines
that ran are in the output, the rest in the error file as ``batch_expired``.

**Work survives a restart** as background responses do: the record names its owner
(:mod:`mockserver.state.owners`: pid, place, start time, heartbeat), progress is kept in
chunks, and any process that finds a batch whose owner is gone (at start-up, then every
:data:`SWEEP` seconds on a shared State) claims it — one claim per owner generation, counted
atomically, so exactly one process wins — and resumes it from its last chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Literal

from mockserver.batches.claims import Owners
from mockserver.batches.inprocess import InProcess
from mockserver.batches.lines import Line, ModelCheck, read_lines
from mockserver.batches.progress import Progress, write_file
from mockserver.batches.record import KEYS, TERMINAL, error_line, legal
from mockserver.clock import Clock
from mockserver.errors import NotFound
from mockserver.files.store import FileStore
from mockserver.lifecycle.runs import wait_until
from mockserver.state.base import State
from mockserver.wire.json import Json
from mockserver.wire.scope import BATCH_KEY

__all__ = ["SWEEP", "Runner"]

log = logging.getLogger("mockserver")

SWEEP = 5.0  # real seconds between looks for batches whose owner is gone (shared State)
CHUNK_LINES = 500  # lines per progress write
CHUNK_SECONDS = 0.5  # …or this much real time, whichever comes first
EXPIRED = "This request could not be executed before the completion window expired."


class Runner:
    """Drives batches through their lifecycle (see the module docstring); the API is
    :class:`~mockserver.batches.desk.Batches`'s."""

    def __init__(
        self,
        state: State,
        clock: Clock,
        files: FileStore,
        call: InProcess,
        model_problem: ModelCheck,
        *,
        step: float = 0.5,
        concurrency: int = 1,
    ) -> None:
        self.state, self.clock, self.files, self.call = state, clock, files, call
        self.model_problem = model_problem
        self.step = step
        self._gate = asyncio.Semaphore(concurrency)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wake: dict[str, asyncio.Event] = {}  # a cancel in this process wakes its batch
        self.owners = Owners(state)
        self._sweeper: asyncio.Task[None] | None = None

    async def _load(self, batch_id: str) -> Json:
        raw = await self.state.get(KEYS.record(batch_id))
        if raw is None:
            raise NotFound(f"No batch found with id '{batch_id}'.", param="batch_id")
        record: Json = json.loads(raw)
        return record

    async def _view(self, record: Json) -> Json:
        """The record with a cancel its owner has not seen yet shown as ``cancelling``."""
        if record["status"] in TERMINAL or record["status"] == "cancelling":
            return record
        flag = await self.state.get(KEYS.cancel(record["id"]))
        if flag is not None:
            return {**record, "status": "cancelling", "cancelling_at": int(flag)}
        return record

    async def _write(self, record: Json) -> None:
        await self.state.put(KEYS.record(record["id"]), json.dumps(record, separators=(",", ":")).encode())

    # ---- driving a batch ----------------------------------------------------------------------

    def _spawn(self, batch_id: str) -> None:
        self._wake[batch_id] = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._drive(batch_id), name=f"batch {batch_id}")
        self._tasks[batch_id] = task

        def done(_: asyncio.Task[None]) -> None:
            self._tasks.pop(batch_id, None)
            self._wake.pop(batch_id, None)

        task.add_done_callback(done)

    async def _drive(self, batch_id: str) -> None:
        try:
            await self.owners.heartbeat(batch_id)
            record = await self._load(batch_id)
            while record["status"] not in TERMINAL:
                record = await self._advance(record)
        except asyncio.CancelledError:
            raise  # shutting down: the batch stays where it is, for the next owner to resume
        except Exception:
            log.exception("batch %s broke", batch_id)
            with contextlib.suppress(Exception):
                record = await self._load(batch_id)
                if record["status"] not in TERMINAL:
                    error = {
                        "code": "server_error",
                        "line": None,
                        "param": None,
                        "message": "The server had an error while running this batch.",
                    }
                    await self._move(record, "failed", errors=[error])

    async def _advance(self, record: Json) -> Json:
        """One move of the status machine."""
        status = record["status"]
        if status == "cancelling":
            await self._until(record, record["_since"] + self.step)
            return await self._finish(record, "cancelled")
        flag = await self.state.get(KEYS.cancel(record["id"]))
        if flag is not None:
            return await self._move(record, "cancelling", cancelling_at=int(flag))
        if self.clock.now() >= record["expires_at"]:
            return await self._finish(record, "expired")
        if status == "validating":
            if await self._until(record, record["_since"] + self.step):
                return record  # woken by a cancel (or the clock passed the window): look again
            return await self._validate(record)
        if status == "in_progress":
            return await self._run_lines(record)
        # finalizing
        if await self._until(record, record["_since"] + self.step):
            return record
        return await self._finish(record, "completed")

    async def _until(self, record: Json, deadline: float) -> bool:
        """Wait until the clock reads ``deadline`` (or the window's end, if sooner); True if a
        cancel in this process woke the batch first."""
        wake = self._wake.setdefault(record["id"], asyncio.Event())
        if wake.is_set():
            wake.clear()
            return True
        clock = asyncio.ensure_future(wait_until(self.clock, min(deadline, record["expires_at"])))
        woken = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait({clock, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (clock, woken):
                task.cancel()
            await asyncio.gather(clock, woken, return_exceptions=True)
        if wake.is_set():
            wake.clear()
            return True
        return bool(self.clock.now() >= record["expires_at"])

    async def _move(self, record: Json, status: str, *, errors: list[Json] | None = None, **times: int) -> Json:
        if not legal(record["status"], status):
            raise RuntimeError(f"illegal batch status change {record['status']} → {status}")
        now = int(self.clock.now())
        stamp = f"{status}_at"  # each status has its time: in_progress_at, cancelled_at…
        moved = {**record, "status": status, stamp: now, "_since": self.clock.now(), **times}
        if errors is not None:
            moved["errors"] = {"object": "list", "data": errors}
        await self._write(moved)
        return moved

    async def _input(self, record: Json) -> tuple[list[Line], list[Json]]:
        """The batch's requests and the problems validation finds (the file gone is one)."""
        try:
            data = await self.files.content(record["input_file_id"])
        except NotFound:
            problem = {
                "code": "file_not_found",
                "line": None,
                "param": "input_file_id",
                "message": f"The input file {record['input_file_id']} was deleted.",
            }
            return [], [problem]
        # 50,000 lines take a while to judge: off the event loop, which keeps serving meanwhile.
        lines, problems = await asyncio.to_thread(read_lines, data, record["endpoint"], self.model_problem)
        return lines, [p.to_json() for p in problems]

    async def _validate(self, record: Json) -> Json:
        lines, problems = await self._input(record)
        if problems:
            return await self._move(record, "failed", errors=problems)
        model = next((line.model for line in lines if line.model is not None), None)
        record = {**record, "model": model, "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
        return await self._move(record, "in_progress")

    async def _run_lines(self, record: Json) -> Json:
        lines, problems = await self._input(record)
        if problems:  # the input file went away (or changed) under a running batch
            await Progress.drop(self.state, record["id"])
            return await self._move(record, "failed", errors=problems)
        progress = await Progress.read(self.state, record["id"])
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in record["_headers"]]
        limit = record.get("_expire_after")
        flushed = time.monotonic()
        for line in lines[progress.done :]:
            if limit is not None and progress.done >= limit:
                break
            async with self._gate:
                answer = await self.call(record["endpoint"], line.body, headers, self._tag(record, line))
            progress.add(record["id"], line.custom_id, answer)
            if len(progress.pending) >= CHUNK_LINES or time.monotonic() - flushed >= CHUNK_SECONDS:
                record = await self._checkpoint(record, progress)
                flushed = time.monotonic()
                if record["status"] != "in_progress" or await self._stopping(record):
                    return record
            await asyncio.sleep(0)  # the loop's other work (interactive requests) goes first
        record = await self._checkpoint(record, progress)
        if limit is not None and progress.done >= limit and progress.done < len(lines):
            return await self._finish(record, "expired")  # x-mockserver-batch-expire: on demand
        if await self._stopping(record):
            return record
        if await self._until(record, record["_since"] + self.step):
            return record
        return await self._move(record, "finalizing")

    async def _stopping(self, record: Json) -> bool:
        """Should the lines stop here: cancelled, expired, or the input file deleted?"""
        if await self.state.get(KEYS.cancel(record["id"])) is not None:
            return True
        if self.clock.now() >= record["expires_at"]:
            return True
        return not await self.files.exists(record["input_file_id"])

    async def _checkpoint(self, record: Json, progress: Progress) -> Json:
        await progress.flush(self.state, record["id"])
        updated = {**record, "request_counts": progress.counts(record), "usage": progress.usage()}
        await self._write(updated)
        await self.owners.heartbeat(record["id"])
        return updated

    def _tag(self, record: Json, line: Line) -> dict[str, object]:
        return {BATCH_KEY: {"id": record["id"], "custom_id": line.custom_id, "line": line.number}}

    async def _finish(self, record: Json, status: Literal["completed", "expired", "cancelled"]) -> Json:
        """Write the output and error files of the lines that ran (for ``expired``, the lines
        that did not run go to the error file), then the terminal status."""
        progress = await Progress.read(self.state, record["id"])
        errors = list(progress.errors)
        if status == "expired":
            lines, _ = await self._input(record)
            errors += [
                error_line(record["id"], line.custom_id, "batch_expired", EXPIRED) for line in lines[progress.done :]
            ]
        out_id = await write_file(self.files, record["id"], "output", progress.outputs)
        err_id = await write_file(self.files, record["id"], "error", errors)
        counts = progress.counts(record)
        if status == "expired":
            counts["failed"] = counts["total"] - counts["completed"]
        record = {
            **record,
            "output_file_id": out_id,
            "error_file_id": err_id,
            "request_counts": counts,
            "usage": progress.usage(),
        }
        record = await self._move(record, status)
        await progress.forget(self.state, record["id"])
        return record

    # ---- batches whose owner is gone ---------------------------------------------------------

    async def start(self) -> None:
        """Take up the batches left unfinished by a process that is gone; on a shared State,
        look again every :data:`SWEEP` seconds (and keep this process's heartbeats)."""
        self.owners.open()
        await self._recover()
        if self.state.shared:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="batches sweeper")

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP)  # real time: processes die in real time
            try:
                for batch_id in list(self._tasks):
                    await self.owners.heartbeat(batch_id)
                await self._recover()
            except Exception:  # a State that cannot answer now: the next look will
                log.exception("could not look for batches left unfinished by a server that is gone")

    async def _recover(self) -> int:
        taken = 0
        for batch_id in await self.state.map_all(KEYS.index):
            raw = await self.state.get(KEYS.record(batch_id))
            if raw is None:
                continue
            record = json.loads(raw)
            if record["status"] in TERMINAL or not await self.owners.orphaned(batch_id, batch_id in self._tasks):
                continue
            generation = int(record.get("_generation", 0))
            if not await self.owners.claim(batch_id, generation):
                continue  # another process claimed it first
            await self._write({**record, "_generation": generation + 1})
            self._spawn(batch_id)
            taken += 1
        if taken:
            log.warning("resumed %d batch(es) left unfinished by a server that is gone", taken)
        return taken

    async def close(self) -> None:
        """Stop the runs (their batches stay where they are, for the next owner to resume)."""
        tasks = [t for t in (self._sweeper, *self._tasks.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.owners.close()
