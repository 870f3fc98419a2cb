"""A running batch's progress: the lines answered so far, kept on the State in chunks.

Each chunk is one write (a run of consecutive lines: their output and error lines, counts and
tokens), so a crash never leaves half a chunk, and a resumed batch starts at the first line no
chunk holds. The chunks are joined into the output and error files when the batch ends, and
then forgotten.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from mockserver.batches.inprocess import Answer
from mockserver.batches.record import KEYS, error_line, output_line, usage_of
from mockserver.files.store import FileStore
from mockserver.spine.seeding import digest
from mockserver.state.base import State
from mockserver.wire.json import Json

__all__ = ["Progress", "write_file"]


@dataclass(slots=True)
class _Tally:
    done: int = 0
    completed: int = 0
    failed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0


@dataclass(slots=True)
class Progress:
    outputs: list[bytes] = field(default_factory=list)  # the output file's lines (2xx answers)
    errors: list[bytes] = field(default_factory=list)  # the error file's lines
    chunks: int = 0  # chunks written
    pending: list[tuple[bool, bytes]] = field(default_factory=list)  # (ok, line) not yet written
    kept: _Tally = field(default_factory=_Tally)  # what the written chunks hold
    tally: _Tally = field(default_factory=_Tally)  # … and the pending lines too

    @property
    def done(self) -> int:
        return self.tally.done

    @classmethod
    async def read(cls, state: State, batch_id: str) -> Progress:
        raws: list[bytes] = []
        while (raw := await state.get(KEYS.chunk(batch_id, len(raws)))) is not None:
            raws.append(raw)
        # Tens of MB of JSON for a big batch: parsed off the event loop, which keeps serving.
        return await asyncio.to_thread(cls._parse, raws)

    @classmethod
    def _parse(cls, raws: list[bytes]) -> Progress:
        progress = cls()
        for raw in raws:
            chunk = json.loads(raw)
            progress.outputs += [line.encode() for line in chunk["out"]]
            progress.errors += [line.encode() for line in chunk["err"]]
            for name in ("done", "completed", "failed", "tokens_in", "tokens_out"):
                setattr(progress.kept, name, getattr(progress.kept, name) + chunk[name])
            progress.chunks += 1
        progress.tally = _Tally(**{k: getattr(progress.kept, k) for k in _Tally.__dataclass_fields__})
        return progress

    def add(self, batch_id: str, custom_id: str, answer: Answer) -> None:
        """One line's answer: 2xx to the output file, any other status to the error file (with
        the endpoint's own error body), no answer at all to the error file with an ``error``."""
        t = self.tally
        t.done += 1
        if answer.status == 0:
            line = error_line(batch_id, custom_id, "server_error", "The request got no answer (the connection broke).")
            ok = False
        else:
            line = output_line(batch_id, custom_id, answer)
            ok = 200 <= answer.status < 300
        if ok:
            t.completed += 1
            given, made = usage_of(answer.body)
            t.tokens_in += given
            t.tokens_out += made
        else:
            t.failed += 1
        self.pending.append((ok, line))

    async def flush(self, state: State, batch_id: str) -> None:
        """Write the pending lines as the next chunk (one write)."""
        if not self.pending:
            return
        out = [line for ok, line in self.pending if ok]
        err = [line for ok, line in self.pending if not ok]
        t, k = self.tally, self.kept
        chunk = {
            "out": [line.decode() for line in out],
            "err": [line.decode() for line in err],
            "done": t.done - k.done,
            "completed": t.completed - k.completed,
            "failed": t.failed - k.failed,
            "tokens_in": t.tokens_in - k.tokens_in,
            "tokens_out": t.tokens_out - k.tokens_out,
        }
        await state.put(KEYS.chunk(batch_id, self.chunks), json.dumps(chunk, separators=(",", ":")).encode())
        self.chunks += 1
        self.outputs += out
        self.errors += err
        self.pending = []
        self.kept = _Tally(t.done, t.completed, t.failed, t.tokens_in, t.tokens_out)

    def counts(self, record: Json) -> Json:
        total = record["request_counts"]["total"]
        return {"total": total, "completed": self.tally.completed, "failed": self.tally.failed}

    def usage(self) -> Json:
        t = self.tally
        return {
            "input_tokens": t.tokens_in,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": t.tokens_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": t.tokens_in + t.tokens_out,
        }

    async def forget(self, state: State, batch_id: str) -> None:
        for n in range(self.chunks):
            await state.delete(KEYS.chunk(batch_id, n))

    @staticmethod
    async def drop(state: State, batch_id: str) -> None:
        """Forget a batch's chunks without reading them (a batch that failed keeps no output)."""
        n = 0
        while await state.delete(KEYS.chunk(batch_id, n)):
            n += 1


async def write_file(files: FileStore, batch_id: str, kind: str, lines: list[bytes]) -> str | None:
    """A batch's ``output`` or ``error`` file (None when it has no lines). Its id derives from
    the batch, so a resumed batch that writes it again writes the same File over."""
    if not lines:
        return None
    data = b"".join(line + b"\n" for line in lines)
    file_id = "file-" + digest(batch_id, kind).hex()[:24]
    made = await files.create(data, f"{batch_id}_{kind}.jsonl", "batch_output", file_id=file_id)
    return str(made["id"])
