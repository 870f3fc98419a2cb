"""A server's instructions per request, counted by Valgrind's callgrind: a measure that other
load on the machine does not move.

CPU time per request on a shared two-core machine moves with whatever else runs (caches,
frequency, hyper-threads, the scheduler), by ±10% from one run to the next. Counting
instructions needs no hardware counter (this machine's kernel has no PMU driver, so
``perf stat -e instructions:u`` answers ``<not supported>``): the server runs under
``valgrind --tool=callgrind``, which counts every instruction it executes, in every thread.
It starts with instrumentation off (start-up at near native speed) and :func:`instrumented`
turns it on; then each window is ``callgrind_control --zero``, exactly ``count`` requests,
each read to its end, and ``callgrind_control --dump``, whose ``summary:`` line is the
instructions executed in between.

A fixed count, not a duration: under callgrind a request costs some 50× its native time, and a
timed load generator leaves requests in flight at the window's end, counted in cost but not in
answers. Here every request sent is answered before the dump. The load is closed-loop:
``concurrency`` keep-alive connections, each sending its next request when its last answer has
been read, so at 16 the server always has work queued, as it does natively at 16.
"""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import procs

__all__ = ["available", "command", "count", "instrumented"]

CONTROL = "callgrind_control"


def available() -> bool:
    """Whether ``valgrind`` and ``callgrind_control`` are on the path."""
    return shutil.which("valgrind") is not None and shutil.which(CONTROL) is not None


def command(argv: Sequence[str], outdir: Path) -> list[str]:
    """``argv`` run under callgrind, instrumentation off until :func:`instrumented`."""
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        # Only the totals are read: no per-line or per-instruction tables to write at each dump.
        "--dump-line=no",
        "--dump-instr=no",
        f"--callgrind-out-file={outdir / 'callgrind.%p'}",
        *argv,
    ]


def _control(pid: int, *flags: str) -> None:
    subprocess.run([CONTROL, *flags, str(pid)], check=True, capture_output=True, timeout=600)


@contextmanager
def instrumented(server: procs.Server) -> Iterator[None]:
    """Instrumentation on for the block (every instruction from here on is counted)."""
    _control(server.pid, "--instr=on")
    try:
        yield
    finally:
        _control(server.pid, "--instr=off")


def _summary(outdir: Path, pid: int) -> int:
    """The ``summary:`` of the newest dump of ``pid`` (dumps are numbered ``.1``, ``.2``, …)."""
    dumps = sorted(outdir.glob(f"callgrind.{pid}.*"), key=lambda p: int(p.suffix[1:]))
    for line in dumps[-1].read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"no summary line in {dumps[-1]}")


def _load(port: int, path: str, body: dict[str, Any], requests: int, concurrency: int) -> None:
    """Exactly ``requests`` POSTs of ``body`` over ``concurrency`` keep-alive connections, each
    answer read to its end (a non-2xx answer raises: it would count an error path)."""
    payload = json.dumps(body).encode()
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    left = [requests]
    lock = threading.Lock()
    failures: list[str] = []

    def worker() -> None:
        conn = http.client.HTTPConnection(procs.HOST, port, timeout=600)
        try:
            while True:
                with lock:
                    if left[0] == 0 or failures:
                        return
                    left[0] -= 1
                conn.request("POST", path, body=payload, headers=headers)
                response = conn.getresponse()
                answer = response.read()
                if response.status // 100 != 2:
                    failures.append(f"{response.status} {answer[:300]!r}")
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{path}: {failures[0]}")


def count(
    server: procs.Server,
    outdir: Path,
    path: str,
    body: dict[str, Any],
    requests: int,
    concurrency: int,
) -> float:
    """Instructions the server executed per answer of ``requests`` POSTs of ``body`` to ``path``
    (inside :func:`instrumented`; warm the case up first)."""
    _control(server.pid, "--zero")
    _load(server.port, path, body, requests, concurrency)
    _control(server.pid, "--dump")
    return _summary(outdir, server.pid) / requests
