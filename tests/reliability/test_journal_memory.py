"""The journal holds bodies as bytes, within a byte budget, however hostile they are (issue 34).

A body of 16 KiB of ``{},`` parses to ~5,400 objects: the journal once kept bodies that size
parsed, so 10,000 of them grew a server by ~3.9 GB and slowed every garbage collection. It now
keeps a small body's bytes (read when an entry is read) and at most
:data:`~mockserver.faults.journal.JOURNAL_BYTES` of them, dropping the oldest entries past it.
A real server in a child process is sent more such bodies than the budget holds; its RSS grows
by less than the budget and a margin, a reset empties the journal, and a body is read back
whole. (That the oldest entries go past the budget is the unit tests' part:
tests/unit/faults/test_journal_bounds.py.)
Sizes: ``make test`` sends 2,500 bodies (40 MB, past the 32 MiB budget); ``full``, 10,000.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from mockserver.faults.journal import BODY_KEPT, JOURNAL_BYTES
from tests.reliability.conftest import BUDGET
from tests.reliability.harness import Child, child_server, proc_status

BODIES = 10_000 if BUDGET.name == "full" else 2_500
MARGIN = 48 * 1024  # kB beyond the budget: the entries themselves, the allocator's slack


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    log = tmp_path_factory.mktemp("journal") / "server.log"
    with child_server([], log) as child:
        yield child


def _hostile() -> bytes:
    """A body just under BODY_KEPT: a list of empty objects (thousands when parsed)."""
    head, tail = b'{"model": "gpt-4o-mini", "messages": [], "pad": [', b"{}]}"
    count = (BODY_KEPT - len(head) - len(tail)) // 3
    return head + b"{}," * count + tail


def test_hostile_bodies_are_kept_within_the_byte_budget(server: Child) -> None:
    body = _hostile()
    assert len(body) <= BODY_KEPT and BODIES * len(body) > JOURNAL_BYTES  # past the budget
    with httpx.Client(base_url=server.url, timeout=30) as client:
        client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        rss = proc_status(server.pid, "VmRSS")
        for _ in range(BODIES):
            answer = client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
            assert answer.status_code == 400  # an empty conversation: journaled all the same
        grown = proc_status(server.pid, "VmRSS") - rss
        assert grown < JOURNAL_BYTES // 1024 + MARGIN, f"RSS grew by {grown} kB"
        # Reading thousands of such bodies back is the client's own (slow) choice: a reset
        # empties the journal, and one body read back is whole (read from its bytes).
        assert client.delete("/__mockserver/journal").status_code in (200, 204)
        assert client.get("/__mockserver/journal").json()["entries"] == []
        client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        (entry,) = client.get("/__mockserver/journal").json()["entries"]
        assert entry["body_bytes"] == len(body) and len(entry["body"]["pad"]) > 5_000
        assert client.get("/health").status_code == 200
