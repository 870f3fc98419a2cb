"""The measured sections. Each returns a plain dict the report renders (see ``report*.py``).

Load sections drive the running servers (:mod:`bench.backends`) from load-generator
processes; the others run in child processes of their own, so torch and its threads never
touch the orchestrating process. Every child has a time limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import driver, procs
from bench.backends import Backends
from bench.loadgen import Cell, rss_mb

__all__ = [
    "LABELS",
    "Options",
    "child",
    "lookup",
    "memory",
    "model_only",
    "prompt50",
    "resident",
    "streams",
    "throughput",
]


@dataclass(frozen=True)
class Options:
    quick: bool
    duration: float
    warmup: float
    rounds: int
    concurrency: tuple[int, ...]
    health_duration: float
    stream_tokens: int
    startup_runs: int
    import_runs: int
    model_reps: int
    model_budget: float
    lookup_rounds: int
    lookup_io: bool
    journal_entries: int
    stored: int
    client: str
    out: Path
    json_out: Path | None
    server_cmd: list[str] | None
    assets: Path | None


# backend, streamed → the row's label
LABELS = {
    ("ceiling", False): "ceiling (Starlette)",
    ("reference", False): "reference",
    ("reference", True): "reference, stream",
    ("scripted", False): "scripted",
    ("scripted", True): "scripted, stream",
    ("replay", False): "replay",
    ("replay", True): "replay, stream",
}


def throughput(o: Options, b: Backends) -> dict[str, Any]:
    """Every backend, non-streamed and streamed, at each concurrency, in ``o.rounds``
    interleaved rounds (the ceiling first in each). Other load on the machine can only lower
    a throughput, so each cell keeps its best round; every round's req/s is kept too."""
    rows = []
    for c in o.concurrency:
        base = Cell(port=0, path=driver.CHAT, concurrency=c, warmup=o.warmup, duration=o.duration, client=o.client)
        best: dict[tuple[str, bool], dict[str, Any]] = {}
        rates: dict[tuple[str, bool], list[float]] = {}
        for _ in range(o.rounds):
            for backend, stream in LABELS:
                server = b.server(backend)
                body = b.streamed if stream else b.plain
                cell = replace(base, port=server.port, server_pid=server.pid, body=body, stream=stream)
                result = driver.run_cell(cell)
                rates.setdefault((backend, stream), []).append(result["requests_per_s"])
                kept = best.get((backend, stream))
                if kept is None or result["requests_per_s"] > kept["requests_per_s"]:
                    best[(backend, stream)] = result
        for (backend, stream), result in best.items():
            row = {"backend": backend, "stream": stream, "concurrency": c, "result": result}
            rows.append(row | {"rounds": rates[(backend, stream)]})
    check = []
    ceiling = b.server("ceiling")
    for c in sorted({min(o.concurrency), max(o.concurrency)}):
        for client in ("raw", "httpx"):
            cell = Cell(
                port=ceiling.port,
                path=driver.CHAT,
                body=b.plain,
                concurrency=c,
                warmup=o.warmup,
                duration=o.duration / 2,
                client=client,
                server_pid=ceiling.pid,
            )
            check.append({"client": client, "concurrency": c, "result": driver.run_cell(cell)})
    return {"notes": b.notes, "rows": rows, "client_check": check}


def prompt50(o: Options, reference: procs.Server) -> dict[str, Any]:
    """A ~50-token prompt, 16 tokens, one request at a time."""
    content = driver.fit_prompt(reference.port, driver.LONG_TEXT.split(), 50, driver.LONG_SUFFIX)
    chosen = driver.choose_chat(reference.port, [content])
    cell = Cell(
        port=reference.port,
        path=driver.CHAT,
        body=chosen.json(),
        concurrency=1,
        warmup=o.warmup,
        duration=o.rounds * o.duration,
        client=o.client,
        server_pid=reference.pid,
    )
    return {"note": chosen.note, "result": driver.run_cell(cell)}


def streams(o: Options, reference: procs.Server) -> dict[str, Any]:
    """Tokens per second for one stream, then for 32 at once with ``/health`` probed meanwhile."""
    prompt = driver.SHORT_PROMPTS[0]
    body = driver.chat_body(
        prompt,
        o.stream_tokens,
        temperature=0,
        ignore_eos=True,  # every stream makes exactly stream_tokens tokens
        stream=True,
        stream_options={"include_usage": True},
    )
    base = Cell(
        port=reference.port,
        path=driver.CHAT,
        body=json.dumps(body),
        stream=True,
        warmup=o.warmup,
        duration=o.rounds * o.duration,
        client=o.client,
        server_pid=reference.pid,
    )
    one = driver.run_cell(base)
    many = replace(base, concurrency=32, warmup=1.0, duration=o.health_duration)
    # The probe starts measuring after the streams are all running and stops before they do.
    probe = Cell(
        port=reference.port,
        path="/health",
        method="GET",
        rate_hz=50.0,
        warmup=1.5,
        duration=o.health_duration - 1.0,
        timeout=10.0,
        client=o.client,
        server_pid=reference.pid,
    )
    many_result, probe_result = driver.run_cells_together([many, probe])
    return {
        "prompt": prompt,
        "tokens": o.stream_tokens,
        "one": one,
        "many": many_result,
        "streams": 32,
        "probe": probe_result,
    }


def resident(b: Backends, settle: float = 10.0) -> dict[str, dict[str, float]]:
    """Each server's resident memory (MiB), once it has stopped growing (a model loads in the
    background after start-up), waiting at most ``settle`` seconds."""
    deadline = time.monotonic() + settle
    last = {name: rss_mb(server.pid) for name, server in b.servers.items()}
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = {name: rss_mb(server.pid) for name, server in b.servers.items()}
        steady = all(abs(now[n].get("rss", 0) - last[n].get("rss", 0)) < 1.0 for n in now)
        last = now
        if steady:
            break
    return last


def child(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run a bench child process that prints one JSON object; its last error line if it fails."""
    done = subprocess.run(argv, cwd=procs.ROOT, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def model_only(o: Options) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.modelbench", "--reps", str(o.model_reps), "--budget", str(o.model_budget)]
    if o.assets is not None:
        argv += ["--assets", str(o.assets)]
    return child(argv, timeout=300)


def lookup(o: Options) -> dict[str, Any]:
    argv = [sys.executable, "bench/cassette_lookup.py", "--json", "--rounds", str(o.lookup_rounds)]
    return child(argv + (["--io"] if o.lookup_io else []), timeout=300)


def memory(o: Options, body: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.memory", "--entries", str(o.journal_entries), "--stored", str(o.stored)]
    return child([*argv, "--body", body], timeout=300)
