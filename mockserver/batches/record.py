"""A batch as the State keeps it, and the lines its output and error files hold.

The record is the Batch object the wire shows plus private fields (``_…``: the creation
order, the headers its lines are sent with, the owner generation). One process — the one
running the batch — writes it; a cancel from anywhere is a separate key (the owner sees it and
moves the batch), so no two processes ever read-modify-write one record.

Progress is kept in *chunks*: each a single write holding a run of consecutive output and
error lines with their counts. A crash loses at most the chunk being gathered, never half of
one, and a resumed batch goes on from the first line no chunk holds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from mockserver.batches.inprocess import Answer
from mockserver.spine.seeding import digest
from mockserver.wire.json import Json, NotFinite, NotJson, dumps, loads

__all__ = ["KEYS", "TERMINAL", "WINDOW", "Keys", "error_line", "legal", "new_record", "output_line", "usage_of"]

TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
# Statuses a cancel moves on from (a terminal batch is not cancellable).
_MOVES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "validating": frozenset({"in_progress", "failed", "expired", "cancelling"}),
        "in_progress": frozenset({"finalizing", "failed", "expired", "cancelling"}),
        "finalizing": frozenset({"completed", "failed", "expired", "cancelling"}),
        "cancelling": frozenset({"cancelled", "failed"}),
    }
)


def legal(current: str, new: str) -> bool:
    return new in _MOVES.get(current, frozenset())


class Keys:
    """The State's keys of the batches (one namespace, ``batches:``)."""

    index = "batches:index"  # map: id → b"1"
    seq = "batches:seq"

    @staticmethod
    def record(batch_id: str) -> str:
        return f"batches:obj:{batch_id}"

    @staticmethod
    def cancel(batch_id: str) -> str:
        return f"batches:cancel:{batch_id}"

    @staticmethod
    def owner(batch_id: str) -> str:
        return f"batches:owner:{batch_id}"

    @staticmethod
    def claim(batch_id: str, generation: int) -> str:
        return f"batches:claim:{batch_id}:{generation}"

    @staticmethod
    def chunk(batch_id: str, n: int) -> str:
        return f"batches:chunk:{batch_id}:{n}"


KEYS = Keys()


def _line_id(batch_id: str, custom_id: str) -> str:
    return "batch_req_" + digest(batch_id, custom_id).hex()[:24]


def _one_line(body: bytes) -> bytes:
    """The body as one line of JSON: its own bytes when they already are (what the endpoints
    send), else re-encoded compactly (else, not JSON at all, as a JSON string)."""
    if b"\n" not in body and b"\r" not in body:
        try:
            loads(body)
            return body
        except (NotJson, NotFinite):
            pass
    try:
        return dumps(loads(body))
    except (NotJson, NotFinite):
        return dumps(body.decode("utf-8", "replace"))


def output_line(batch_id: str, custom_id: str, answer: Answer) -> bytes:
    """A line as OpenAI writes it for a request that was answered (2xx to the output file,
    anything else to the error file): the endpoint's own body, byte for byte."""
    head = dumps({"id": _line_id(batch_id, custom_id), "custom_id": custom_id})[:-1]
    response = b'{"status_code":%d,"request_id":%s,"body":%s}' % (
        answer.status,
        dumps(answer.request_id),
        _one_line(answer.body),
    )
    return head + b',"response":' + response + b',"error":null}'


def error_line(batch_id: str, custom_id: str, code: str, message: str) -> bytes:
    """A line for a request that got no answer (the batch expired first, the line broke)."""
    return dumps(
        {
            "id": _line_id(batch_id, custom_id),
            "custom_id": custom_id,
            "response": None,
            "error": {"code": code, "message": message},
        }
    )


def usage_of(body: bytes) -> tuple[int, int]:
    """(input, output) tokens of an answer's ``usage``, whichever endpoint's shape it has."""
    try:
        usage = json.loads(body).get("usage")
    except (ValueError, AttributeError):
        return 0, 0
    if not isinstance(usage, dict):
        return 0, 0
    given = usage.get("input_tokens", usage.get("prompt_tokens", 0))
    made = usage.get("output_tokens", usage.get("completion_tokens", 0))
    return (given if isinstance(given, int) else 0), (made if isinstance(made, int) else 0)


WINDOW = 86_400  # seconds: the one completion window, "24h"


def new_record(
    batch_id: str,
    input_file_id: str,
    endpoint: str,
    metadata: Json | None,
    headers: Sequence[tuple[bytes, bytes]],
    now: float,
    seq: int,
) -> Json:
    """A batch just created: ``validating``, every later id and time still null."""
    created = int(now)
    return {
        "id": batch_id,
        "object": "batch",
        "endpoint": endpoint,
        "model": None,  # the lines' model, once validated
        "errors": None,
        "input_file_id": input_file_id,
        "completion_window": "24h",
        "status": "validating",
        "output_file_id": None,
        "error_file_id": None,
        "created_at": created,
        "in_progress_at": None,
        "expires_at": created + WINDOW,
        "finalizing_at": None,
        "completed_at": None,
        "failed_at": None,
        "expired_at": None,
        "cancelling_at": None,
        "cancelled_at": None,
        "request_counts": {"total": 0, "completed": 0, "failed": 0},
        "usage": fresh_usage(),
        "metadata": metadata,
        "_seq": seq,  # the creation order (times are whole seconds; a frozen clock never moves)
        "_headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in headers],
        "_expire_after": None,  # x-mockserver-batch-expire
        "_generation": 0,  # owners so far: a claim is counted per generation
        "_since": now,  # when the status began (exact: the stamps are whole seconds)
    }


def fresh_usage() -> Json:
    return {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }
