"""Memory per journal entry and per stored response, run as its own process:
``python -m bench.memory [--entries N] [--stored N] [--body JSON]``. Prints one JSON object.

* **journal**: a :class:`mockserver.faults.journal.Journal` filled with ``--entries`` entries the way
  the fault injector fills it — the request's body parsed afresh for each (the benchmark's
  16-token chat request unless ``--body``), then completed as a response does (status, seed,
  events, bytes, ending, duration). The journal keeps 10,000 by default (``--journal-size``).
* **store**: a real Responses answer (16 output tokens with logprobs) made over HTTP by an
  in-process server, then ``--stored`` independent copies of it in the memory store; once for
  a non-streamed response and once for a background stream, whose events are kept for resuming
  with ``starting_after``. The store keeps 10,000 by default (``--store-size``).

Bytes are what ``tracemalloc`` sees the new objects take, divided by their number.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from typing import Any

__all__ = ["journal_bytes", "store_bytes"]


def journal_bytes(raw: bytes, entries: int) -> dict[str, Any]:
    from mockserver.faults.journal import Journal
    from mockserver.wire.json import parse_lenient as parse_body

    journal = Journal(size=entries)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(entries):
        entry = journal.open(
            time=time.time(),
            method="POST",
            path="/v1/chat/completions",
            session=None,
            retry_attempt=0,
            body=parse_body(raw),
        )
        entry.status, entry.seed, entry.events, entry.bytes = 200, 4_141_471_607_091_103_956 + i, 20, 6_000
        entry.ended, entry.duration = "done", 0.02
    per_entry = (tracemalloc.get_traced_memory()[0] - before) / entries
    tracemalloc.stop()
    assert len(journal.entries()) == entries
    return {"entries": entries, "body_bytes": len(raw), "bytes_per_entry": per_entry}


def store_bytes(stored: int) -> dict[str, Any]:
    import httpx

    from bench import responses_poll
    from tests.support.live import serve_in_thread

    served = responses_poll.app()
    out: dict[str, Any] = {"stored": stored}
    with serve_in_thread(served) as live, httpx.Client(base_url=live.base_url, timeout=60) as http:
        for kind, stream in (("plain", False), ("background_stream", True)):
            record, events = responses_poll.template(served, http, stream=stream)
            _, per_record = responses_poll.fill(served, record, events, stored)
            out[kind] = {
                "bytes_per_response": per_record,
                "json_bytes": len(json.dumps(record.response)),
                "events": len(events),
                "events_json_bytes": sum(len(json.dumps(e)) for e in events),
            }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--stored", type=int, default=1_000)
    parser.add_argument("--body", default="", help="the journalled request body (default: a 16-token chat request)")
    args = parser.parse_args()
    body = args.body or json.dumps(
        {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "Write a short poem about rain."}],
            "max_tokens": 16,
            "temperature": 0,
        }
    )
    result = {"journal": journal_bytes(body.encode(), args.entries), "store": store_bytes(args.stored)}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
