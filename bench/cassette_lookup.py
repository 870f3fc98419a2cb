"""What a cassette lookup costs as the cassette grows: ``python bench/cassette_lookup.py [--io]``.

Each lookup is the whole path the replay backend will take for a request: redact the live
body, parse it, drop ignored fields, canonical JSON, SHA-256, one dict probe, advance the
cursor. The index holds 10, 1,000 or 10,000 chat interactions (a system and a user message,
~330-byte bodies); the same 1,000 request bodies (drawn with a fixed seed from those
recorded) are looked up in each of several rounds, and the median round gives µs per lookup.
Lookup must stay flat as the index grows (issue 6: within 1.5x of the 10-interaction figure
at 10,000). ``--io`` also times saving and loading one 10,000-interaction cassette.

Figures are for issue notes, never assertions in the test suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import random
import statistics
import tempfile
import time
from typing import Any

from mockserver.cassettes.files import CassetteDir
from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse
from mockserver.cassettes.matching import Index

SIZES = (10, 1_000, 10_000)
SYSTEM = "You are a concise assistant for a travel company. Answer in two sentences at most. " * 2


def _body(i: int) -> bytes:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Tell me about city #{i}."}]
    return json.dumps({"model": "gpt-4o-mini", "messages": messages, "temperature": 0.7, "max_tokens": 64}).encode()


def _interactions(n: int) -> list[Interaction]:
    answer = b'{"id":"chatcmpl-1","object":"chat.completion","choices":[]}'
    uri = "https://api.openai.com/v1/chat/completions"
    return [
        Interaction(RecordedRequest("POST", uri, (), _body(i)), RecordedResponse(200, (), answer)) for i in range(n)
    ]


def _lookup_us(index: Index, bodies: list[bytes], rounds: int) -> float:
    per_round: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        for body in bodies:
            index.lookup("POST", "/v1/chat/completions", body)
        per_round.append((time.perf_counter() - start) / len(bodies) * 1e6)
    return statistics.median(per_round)


def measure(rounds: int, io: bool) -> dict[str, Any]:
    """Index build (ms) and lookup (µs, median round) per size; with ``io``, save and load."""
    rng = random.Random(0)
    sizes = []
    for n in SIZES:
        interactions = _interactions(n)
        start = time.perf_counter()
        index = Index(interactions)
        build_ms = (time.perf_counter() - start) * 1e3
        bodies = [_body(rng.randrange(n)) for _ in range(1_000)]
        _lookup_us(index, bodies, 1)  # warm-up
        sizes.append({"interactions": n, "build_ms": build_ms, "lookup_us": _lookup_us(index, bodies, rounds)})
    result: dict[str, Any] = {"rounds": rounds, "body_bytes": len(_body(0)), "sizes": sizes}
    if io:
        interactions = _interactions(10_000)
        with tempfile.TemporaryDirectory() as tmp:
            store = CassetteDir(tmp)
            start = time.perf_counter()
            store.save("big", interactions)
            saved = time.perf_counter() - start
            size = store.resolve("big").stat().st_size
            start = time.perf_counter()
            loaded = store.load("big")
            read = time.perf_counter() - start
        assert len(loaded) == 10_000
        result["io"] = {"interactions": 10_000, "bytes": size, "save_s": saved, "load_s": read}
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=9, help="rounds of 1,000 lookups per size (default 9)")
    p.add_argument("--io", action="store_true", help="also time saving and loading a 10,000-interaction cassette")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object instead")
    args = p.parse_args(argv)
    result = measure(args.rounds, args.io)
    if args.json:
        print(json.dumps(result), flush=True)
        return 0
    print("| interactions | index build (ms) | lookup (µs, median round) | vs 10 |")
    print("| ---: | ---: | ---: | ---: |")
    baseline = result["sizes"][0]["lookup_us"]
    for size in result["sizes"]:
        us = size["lookup_us"]
        print(f"| {size['interactions']:,} | {size['build_ms']:.1f} | {us:.2f} | {us / baseline:.2f}x |")
    if "io" in result:
        io = result["io"]
        print(
            f"\n10,000-interaction cassette ({io['bytes'] / 1e6:.1f} MB): "
            f"save {io['save_s']:.2f} s, load {io['load_s']:.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
