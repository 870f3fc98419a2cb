"""The load generator, run as its own process: ``python -m bench.loadgen '<cell as JSON>'``.

It reads one :class:`Cell` as JSON from its argument, drives the server, and prints one
JSON result on stdout. Running it in a separate process keeps its CPU off the server's
event loop (on two cores they still share the machine; the result reports both processes'
CPU use, and the whole machine's).

Two shapes of load:

* **closed loop** (``rate_hz`` unset): ``concurrency`` workers, each with its own keep-alive
  connection, send the next request as soon as the last one finished. A warm-up phase runs
  the same load and is discarded (see :class:`_Window`); then the measured window runs for
  ``duration`` seconds.
* **probe** (``rate_hz`` set): one worker sends at a fixed rate, e.g. ``/health`` at 50 Hz,
  to see how quickly the server answers while something else loads it.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.httpclient import Connection, HttpxConnection, Reply, Request, open_connection
from bench.stats import summarize

__all__ = ["Cell", "rss_mb", "run_cell", "system_busy"]

_DONE = b"data: [DONE]\n\n"


@dataclass(frozen=True)
class Cell:
    """One measurement: what to send, how hard, for how long."""

    port: int
    path: str
    method: str = "POST"
    body: str = ""
    concurrency: int = 1
    warmup: float = 1.0  # seconds of load before measuring
    duration: float = 5.0  # seconds measured
    max_requests: int = 1_000_000  # a second bound on the measured window
    timeout: float = 60.0  # per request
    stream: bool = False  # expect SSE ending in [DONE]
    drain: bool = True  # wait for requests in flight at the window's end (else hang up on them)
    client: str = "raw"  # "raw" sockets or "httpx"
    rate_hz: float | None = None  # probe mode
    server_pid: int | None = None  # to report the server's CPU use over the window
    host: str = "127.0.0.1"


@dataclass
class _Tally:
    latencies: list[float] = field(default_factory=list)
    cycles: list[float] = field(default_factory=list)  # send to next send, per worker
    first_chunks: list[float] = field(default_factory=list)
    first_tokens: list[float] = field(default_factory=list)  # streams that carried any text
    completion_tokens: list[int] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    in_window: int = 0  # completions inside the measured window, whenever sent (for requests/s)
    chunks_in_window: int = 0  # streamed chunks (SSE event batches) arriving inside the window
    errors: int = 0
    sent: int = 0
    first_error: str = ""


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc; 0 when unavailable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_mb(pid: int) -> dict[str, float]:
    """Resident memory of a process now (``rss``) and at its peak so far (``hwm``), in MiB."""
    found: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    found["rss" if line.startswith("VmRSS") else "hwm"] = int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return found


def system_busy() -> float:
    """CPU seconds all processes spent busy (every core together), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0.0
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def _usage(reply: Reply, stream: bool) -> dict[str, Any] | None:
    """The ``usage`` object of a reply (streams: the include_usage chunk before [DONE])."""
    try:
        if stream:
            frames = reply.body.rsplit(b"data: ", 2)
            data = json.loads(frames[-2]) if len(frames) >= 3 else {}
        else:
            data = json.loads(reply.body)
    except ValueError:
        return None
    usage = data.get("usage") if isinstance(data, dict) else None
    return usage if isinstance(usage, dict) else None


def _check(cell: Cell, reply: Reply) -> str:
    """Why a reply is wrong, or ''."""
    if reply.status != 200:
        return f"HTTP {reply.status}: {reply.body[:200]!r}"
    if cell.stream and not reply.body.endswith(_DONE):
        return f"stream without [DONE]: {reply.body[-200:]!r}"
    return ""


class _Window:
    """The measured window, opened once the load is steady.

    Warm-up lasts ``cell.warmup`` seconds *and* until every worker has seen its first answer
    begin (a first SSE frame, or a whole JSON reply): with 64 slow requests in flight, a fixed
    warm-up could end before any of them answered and measure a half-started system.
    """

    def __init__(self, workers: int) -> None:
        self.start = math.inf
        self.end = math.inf
        self.opened = asyncio.Event()
        self._waiting = set(range(workers))

    def warm(self, worker: int) -> None:
        self._waiting.discard(worker)

    async def open_after(self, cell: Cell) -> None:
        await asyncio.sleep(cell.warmup)
        deadline = time.perf_counter() + cell.timeout  # never wait for ever on a stuck worker
        while self._waiting and time.perf_counter() < deadline:
            await asyncio.sleep(0.005)
        self.start = time.perf_counter()
        self.end = self.start + cell.duration
        self.opened.set()

    def __contains__(self, moment: float) -> bool:
        return self.start <= moment <= self.end


async def _worker(
    n: int, cell: Cell, request: Request, tally: _Tally, window: _Window, shared: httpx.AsyncClient | None
) -> None:
    conn: Connection | None = None
    period = 1.0 / cell.rate_hz if cell.rate_hz else 0.0

    def on_chunk(now: float) -> None:
        window.warm(n)
        tally.chunks_in_window += cell.stream and now in window

    next_tick = time.perf_counter()
    last_start = 0.0  # of this worker's previous measured request, once there is one
    done = 0.0
    finished_one = False  # a request sent inside the window has been answered
    try:
        while tally.sent < cell.max_requests:
            now = time.perf_counter()
            # Each worker stays past the window's end until one of its requests sent inside the
            # window is answered: in a cell slower than the window, every request would
            # otherwise have been sent during the warm-up and nothing would be measured.
            if now >= window.end and (finished_one or not cell.drain or now >= window.end + cell.timeout):
                break
            if period:  # probe: a fixed schedule; a late answer delays, never bunches, the next
                delay = next_tick - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                next_tick = max(next_tick + period, time.perf_counter())
            if conn is None:
                conn = await open_connection(cell.client, cell.host, cell.port, shared)
            start = time.perf_counter()
            measured = start >= window.start
            tally.sent += measured
            if last_start:
                tally.cycles.append(start - last_start)
            last_start = start if measured else 0.0
            limit = cell.timeout if cell.drain else min(cell.timeout, max(0.0, window.end - start) + 0.05)
            try:
                async with asyncio.timeout(limit):
                    reply = await conn.send(request, on_chunk)
            except (
                OSError,
                asyncio.IncompleteReadError,
                asyncio.LimitOverrunError,
                TimeoutError,
                httpx.HTTPError,
            ) as exc:
                if not cell.drain and time.perf_counter() >= window.end:
                    break  # hung up on purpose at the window's end: not an error
                tally.errors += measured
                tally.first_error = tally.first_error or repr(exc)
                await conn.close()
                conn = None  # the connection's state is unknown: start afresh
                continue
            done = time.perf_counter()
            window.warm(n)
            problem = _check(cell, reply)
            # Throughput counts every good answer finishing inside the window, even one sent
            # during the warm-up, as a steady closed loop always has requests straddling it.
            tally.in_window += not problem and done in window
            if not measured:
                continue
            finished_one = True
            if problem:
                tally.errors += 1
                tally.first_error = tally.first_error or problem
                continue
            tally.latencies.append(done - start)
            tally.first_chunks.append(reply.first_chunk - start)
            if reply.first_token:
                tally.first_tokens.append(reply.first_token - start)
            if cell.method == "POST":
                usage = _usage(reply, cell.stream)
                if usage:
                    tally.completion_tokens.append(int(usage.get("completion_tokens", 0)))
                    tally.prompt_tokens.append(int(usage.get("prompt_tokens", 0)))
        if last_start and done > last_start:  # the last cycle has no next send to end it
            tally.cycles.append(done - last_start)
    finally:
        if conn is not None:
            await conn.close()


async def _meter(cell: Cell, window: _Window, out: dict[str, float]) -> None:
    """CPU seconds of this process and of the server, sampled at the window's two edges."""
    await window.opened.wait()
    for edge, name in ((window.start, "start"), (window.end, "end")):
        await asyncio.sleep(max(0.0, edge - time.perf_counter()))
        out[f"client_{name}"] = time.process_time()
        out[f"server_{name}"] = _cpu_seconds(cell.server_pid) if cell.server_pid else 0.0
        out[f"system_{name}"] = system_busy()
    if cell.server_pid:  # the server's memory with the load still on (workers drain after this)
        out["server_rss_mb"] = rss_mb(cell.server_pid).get("rss", 0.0)


def _mean(values: list[int]) -> float | None:
    return sum(values) / len(values) if values else None


async def run_cell(cell: Cell) -> dict[str, Any]:
    """Drive one cell and return its summary (latencies in ms, CPU as a fraction of one core)."""
    request = Request(cell.method, cell.path, cell.body.encode())
    tally = _Tally()
    cpu: dict[str, float] = {}
    shared = HttpxConnection.shared_client(cell.host, cell.port, cell.concurrency) if cell.client == "httpx" else None
    workers = 1 if cell.rate_hz else cell.concurrency
    window = _Window(workers)
    try:
        await asyncio.gather(
            window.open_after(cell),
            _meter(cell, window, cpu),
            *(_worker(n, cell, request, tally, window, shared) for n in range(workers)),
        )
    finally:
        if shared is not None:
            await shared.aclose()
    # Little's law for a closed loop: throughput = workers / mean cycle. Counting completions
    # in the window is quantized when slow requests finish in synchronized rounds (64 equal
    # requests stepped round-robin all end together); cycle times are not.
    cycle = sum(tally.cycles) / len(tally.cycles) if tally.cycles else math.nan
    return {
        "requests_per_s": workers / cycle if tally.cycles and not cell.rate_hz else tally.in_window / cell.duration,
        "requests_per_s_counted": tally.in_window / cell.duration,
        "chunks_per_s": tally.chunks_in_window / cell.duration,
        "latency_ms": summarize(tally.latencies),
        "first_chunk_ms": summarize(tally.first_chunks),
        "first_token_ms": summarize(tally.first_tokens),
        "errors": tally.errors,
        "first_error": tally.first_error,
        "completed": len(tally.latencies),
        "completion_tokens_mean": _mean(tally.completion_tokens),
        "completion_tokens_total": sum(tally.completion_tokens),
        "prompt_tokens_mean": _mean(tally.prompt_tokens),
        "client_cpu": (cpu.get("client_end", 0) - cpu.get("client_start", 0)) / cell.duration,
        "server_cpu": (cpu.get("server_end", 0) - cpu.get("server_start", 0)) / cell.duration,
        # Whole-machine busy time: minus server and client, it is what *else* ran (noise).
        "system_cpu": (cpu.get("system_end", 0) - cpu.get("system_start", 0)) / cell.duration,
        "server_rss_mb": cpu.get("server_rss_mb"),
    }


def main() -> int:
    cell = Cell(**json.loads(sys.argv[1]))
    try:  # the same fast loop as the server, when installed
        import uvloop
    except ImportError:
        result = asyncio.run(run_cell(cell))
    else:
        result = uvloop.run(run_cell(cell))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
