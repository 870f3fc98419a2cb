"""Responses store: poll latency with 1,000 stored responses, and memory per stored response.

    python bench/responses_poll.py [--stored 1000] [--polls 3000]

One real response is created over HTTP (16 output tokens with logprobs, so it is a fair
size); the store is then filled with independent copies of it under new ids (the model's
time is not what is measured). Polls are ``GET /v1/responses/{id}`` over one keep-alive
connection against a live uvicorn server in a thread — first from this process, then from a
load generator in its own process (``bench.loadgen``), which is how a client really polls.
Memory is what ``tracemalloc`` sees the copies take. Not run by the tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

# `python bench/responses_poll.py` puts bench/ on sys.path, not the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import asyncio
import json
import random
import statistics
import time
import tracemalloc
from dataclasses import replace
from typing import Any

import httpx

from bench import driver
from bench.loadgen import Cell
from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.state.memory import MemoryStore
from mockserver.state.records import Record
from tests.support.live import serve_in_thread

__all__ = ["BODY", "app", "fill", "template"]

# 16 output tokens with logprobs: a fair size for a stored response.
BODY: dict[str, Any] = {
    "model": "m",
    "input": "Tell me about Lisbon.",
    "max_output_tokens": 16,
    "include": ["message.output_text.logprobs"],
    "top_logprobs": 2,
    "extra_body": {"ignore_eos": True},
}


def app() -> Any:
    return create_app(Settings(frozen_time=1_700_000_000.0))


def _store(served: Any) -> MemoryStore:
    store = served.state.ctx.responses.store
    assert isinstance(store, MemoryStore)
    return store


def template(served: Any, http: httpx.Client, stream: bool = False) -> tuple[Record, list[dict[str, Any]]]:
    """One real stored response made over HTTP; with ``stream``, a background stream, whose
    events the store keeps for resuming (``starting_after``), and those events."""
    if stream:
        with http.stream("POST", "/responses", json={**BODY, "stream": True, "background": True}) as answer:
            lines = answer.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            response_id = json.loads(first[6:])["response"]["id"]
            for _ in lines:  # to the end: the record is complete once the stream is
                pass
    else:
        response_id = http.post("/responses", json=BODY).json()["id"]
    store = _store(served)
    record = asyncio.run(store.get(response_id))
    assert record is not None
    return record, asyncio.run(store.events(response_id, -1))


def fill(served: Any, record: Record, events: list[dict[str, Any]], count: int) -> tuple[list[str], float]:
    """``count`` independent copies of ``record`` (and its events) under new ids; returns the
    ids and the bytes each copy takes, as ``tracemalloc`` sees them."""
    store = _store(served)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    ids = []
    for i in range(count):
        copy = json.loads(json.dumps(record.response))
        copy["id"] = f"resp_bench{len(store):06d}x{i}"
        items = tuple(json.loads(json.dumps(record.input_items)))
        asyncio.run(store.create(replace(record, id=copy["id"], response=copy, input_items=items, events=0)))
        if events:
            copied = json.loads(json.dumps(events))
            asyncio.run(store.update(copy["id"], copy, copied, frozenset({record.status})))
        ids.append(copy["id"])
    per_record = (tracemalloc.get_traced_memory()[0] - before) / count
    tracemalloc.stop()
    return ids, per_record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stored", type=int, default=1000)
    parser.add_argument("--polls", type=int, default=3000)
    args = parser.parse_args()
    served = app()
    with serve_in_thread(served) as live, httpx.Client(base_url=live.base_url) as http:
        record, _ = template(served, http)
        store = _store(served)
        ids, per_response = fill(served, record, [], args.stored)
        rng = random.Random(0)
        for response_id in ids[:50]:  # warm the connection and the routes
            http.get(f"/responses/{response_id}")
        latencies = []
        for _ in range(args.polls):
            response_id = rng.choice(ids)
            start = time.perf_counter()
            answer = http.get(f"/responses/{response_id}")
            latencies.append((time.perf_counter() - start) * 1000)
            assert answer.status_code == 200
        latencies.sort()
        p50 = statistics.median(latencies)
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        size = len(json.dumps(record.response))
        print(f"stored responses: {len(store)} (each {size} bytes of JSON)")
        print(f"poll latency over {args.polls} GETs: p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {latencies[-1]:.2f} ms")
        print(f"memory per stored response: {per_response / 1024:.1f} KiB")
        # The same polls from a load generator in its own process: the in-process client above
        # shares the GIL with the server thread, which inflates its tail.
        port = int(live.url.rsplit(":", 1)[1])
        for concurrency in (1, 8):
            cell = Cell(
                port=port,
                path=f"/v1/responses/{ids[len(ids) // 2]}",
                method="GET",
                concurrency=concurrency,
                warmup=1.0,
                duration=5.0,
            )
            latency = driver.run_cell(cell)["latency_ms"]
            print(
                f"poll latency, separate client process, concurrency {concurrency}: p50 {latency['p50']:.2f} ms, "
                f"p99 {latency['p99']:.2f} ms, max {latency['max']:.2f} ms"
            )


if __name__ == "__main__":
    main()
