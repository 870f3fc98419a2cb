"""What recording one more interaction costs as the cassette grows: ``python bench/recording_cost.py``.

Issue 16 measured appends that rewrote the whole YAML file: 82 ms per request at first, 570 ms
at ~780 interactions. This times, side by side in one run, at 10, 1,000 and 10,000 recorded
interactions:

* **append** — today's :func:`mockserver.cassettes.files.append`: the new interaction written
  at the end of the file (appendable layout), fsynced.
* **rewrite** — what ``append`` did before: load the whole cassette, then
  :func:`~mockserver.cassettes.files.save` it with the new interaction added (atomic rewrite:
  temporary file, fsync, rename, directory fsync).
* **first append to a vcrpy-layout file** — the one-time move of an old cassette (written by
  ``save`` or by vcrpy) to the appendable layout, which the first append pays (timed at 10 and
  1,000 only: it is one rewrite, and at 10,000 a rewrite takes tens of seconds).

Each cassette is built once (one ``append`` call or one ``save`` call with all its
interactions), then single-interaction appends are timed one by one, round-robin over the three
sizes (a busy moment of a shared machine then lands on every size alike); the median is kept.
Half the interactions are streamed chat completions (a dozen SSE chunks, offsets kept), half
plain ones, with request and response headers as a recording keeps them. Afterwards the
appended file is loaded to check that every append landed (each rewrite loads its file anyway).
The whole run takes two to three minutes on 2 cores, most of it the old way at 10,000.

Figures are for issue notes, never assertions in the test suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import functools
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from mockserver.cassettes import files
from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse, Stream, StreamEvent

SIZES = (10, 1_000, 10_000)
URI = "https://api.openai.com/v1/chat/completions"
SYSTEM = "You are a concise assistant for a travel company. Answer in two sentences at most."
ANSWER = "Lisbon is a sunny, hilly city on the Atlantic, known for its trams, tiles and pastries."


def _interaction(i: int) -> Interaction:
    """Recorded chat completion number ``i``: streamed when ``i`` is odd."""
    stream = i % 2 == 1
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Tell me about city #{i}."}]
    body = {"model": "gpt-4o-mini", "messages": messages, "max_tokens": 64, "stream": stream}
    request = RecordedRequest(
        "POST",
        URI,
        (
            ("content-type", "application/json"),
            ("authorization", "Bearer sk-REDACTED"),
            ("user-agent", "OpenAI/Python"),
        ),
        json.dumps(body).encode(),
    )
    headers: tuple[tuple[str, str], ...] = (("x-request-id", f"req_{i:08d}"), ("openai-processing-ms", "212"))
    cid = f"chatcmpl-{i:08d}"
    if not stream:
        answer = {
            "id": cid,
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 31, "completion_tokens": 21, "total_tokens": 52},
        }
        return Interaction(
            request,
            RecordedResponse(200, (("content-type", "application/json"), *headers), json.dumps(answer).encode()),
        )
    words = ANSWER.split(" ")
    chunks = [
        {"id": cid, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": w + " "}}]}
        for w in words[:12]
    ]
    events = [StreamEvent(0.2 + n * 0.02, f"data: {json.dumps(c)}\n\n".encode()) for n, c in enumerate(chunks)]
    events.append(StreamEvent(0.5, b"data: [DONE]\n\n"))
    return Interaction(
        request,
        RecordedResponse.streamed(200, (("content-type", "text/event-stream"), *headers), Stream(tuple(events))),
    )


def _old_append(path: Path, new: list[Interaction]) -> None:
    """``append`` as it was before the appendable layout: the whole file read and rewritten."""
    existing = files.load(path) if path.exists() else ()
    files.save(path, (*existing, *new))


def _append_one(path: Path, extra: list[Interaction], k: int) -> None:
    files.append(path, [extra[k]])


def _rewrite_one(path: Path, extra: list[Interaction], k: int) -> None:
    _old_append(path, [extra[k]])


def _timed(times: int, one: Callable[[int], None]) -> list[float]:
    """Milliseconds of each of ``times`` calls ``one(k)``."""
    found = []
    for k in range(times):
        start = time.perf_counter()
        one(k)
        found.append((time.perf_counter() - start) * 1e3)
    return found


def measure(appends: int, rewrites: int, big_rewrites: int) -> list[dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        extra = {n: [_interaction(n + k) for k in range(max(appends, rewrites, big_rewrites) + 1)] for n in SIZES}
        appended = {n: root / f"append-{n}.yaml" for n in SIZES}
        for n in SIZES:
            files.append(appended[n], [_interaction(i) for i in range(n)])  # one call: the appendable layout
            rows[n] = {"interactions": n, "appends": appends, "append_bytes": appended[n].stat().st_size}
        # Appends round-robin over the sizes, so a busy moment of a shared machine lands on all alike.
        took: dict[int, list[float]] = {n: [] for n in SIZES}
        for k in range(appends):
            for n in SIZES:
                took[n] += _timed(1, functools.partial(_append_one, appended[n], extra[n][k:]))
        for n in SIZES:
            assert len(files.load(appended[n])) == n + appends  # every append landed; it loads whole
            rows[n].update(append_ms=statistics.median(took[n]), append_min_ms=min(took[n]))
        print("  appends timed; now the old way", file=sys.stderr, flush=True)

        for n in SIZES:
            rewritten = root / f"rewrite-{n}.yaml"
            files.save(rewritten, [_interaction(i) for i in range(n)])  # vcrpy's layout, as all were before
            rows[n]["rewrite_bytes"] = rewritten.stat().st_size
            rows[n]["move_ms"] = None
            if n < 10_000:  # at 10,000 it is one more rewrite (~ the rewrite column), once
                moved = root / f"moved-{n}.yaml"
                shutil.copyfile(rewritten, moved)
                rows[n]["move_ms"] = _timed(1, functools.partial(_append_one, moved, extra[n]))[0]
                assert len(files.load(moved)) == n + 1
            count = big_rewrites if n >= 10_000 else rewrites
            rows[n].update(
                rewrites=count,
                rewrite_ms=statistics.median(_timed(count, functools.partial(_rewrite_one, rewritten, extra[n]))),
            )
            print(f"  {n:,} rewritten", file=sys.stderr, flush=True)
    return [rows[n] for n in SIZES]


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--appends", type=int, default=20, help="appends timed at each size (default 20)")
    p.add_argument("--rewrites", type=int, default=3, help="old-style rewrites timed at 10 and 1,000 (default 3)")
    p.add_argument("--big-rewrites", type=int, default=1, help="old-style rewrites timed at 10,000 (default 1)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object instead")
    args = p.parse_args(argv)
    rows = measure(args.appends, args.rewrites, args.big_rewrites)
    if args.json:
        print(json.dumps(rows), flush=True)
        return 0
    first = rows[0]["append_ms"]
    print(
        "| interactions | append (ms, median) | append (ms, fastest) | vs 10 "
        "| rewrite whole file (ms, median) | rewrite / append "
        "| first append to a vcrpy-layout file (ms, once) | file size (appendable / vcrpy layout) |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        moved = "—" if row["move_ms"] is None else f"{row['move_ms']:,.1f}"
        print(
            f"| {row['interactions']:,} | {row['append_ms']:.2f} | {row['append_min_ms']:.2f} "
            f"| {row['append_ms'] / first:.2f}x "
            f"| {row['rewrite_ms']:,.1f} | {row['rewrite_ms'] / row['append_ms']:,.0f}x | {moved} "
            f"| {_size(row['append_bytes'])} / {_size(row['rewrite_bytes'])} |"
        )
    timed = ", ".join(f"{r['rewrites']} at {r['interactions']:,}" for r in rows)
    print(
        f"\n{rows[0]['appends']} appends timed at each size; rewrites timed: {timed}. "
        "Each write is fsynced (both ways)."
    )
    print("The first append to a vcrpy-layout file is timed below 10,000 only: it costs one rewrite, once.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
