"""Start-up figures: ``import mockserver`` cost, and ``mockserver serve`` to its first 200.

Each figure is the median of several fresh processes, because a single start-up swings by
tens of milliseconds with the page cache and the scheduler.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.procs import ROOT, free_port, post_json, spawn, stop, wait_ready

__all__ = ["import_figures", "serve_startup", "torch_imported"]


def _wall(code: str) -> float:
    """Seconds for a fresh interpreter to run ``code`` and exit."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120, capture_output=True)
    return time.perf_counter() - start


def torch_imported(code: str) -> bool:
    """Whether running ``code`` imports torch, from ``python -X importtime``'s module list."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        cwd=ROOT,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    # Lines look like "import time:       123 |       4567 |   torch" (indented by depth).
    names = (line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:"))
    return any(name == "torch" for name in names)


def import_figures(runs: int, statements: Sequence[str]) -> dict[str, Any]:
    """Median wall time of each statement minus the median of ``pass``, in ms.

    Runs alternate between the baseline and the statements so drift (other load, CPU
    frequency) hits both alike.
    """
    samples: dict[str, list[float]] = {"pass": [], **{s: [] for s in statements}}
    for statement in samples:  # one unmeasured round warms the page cache
        _wall(statement)
    for _ in range(runs):
        for statement in samples:
            samples[statement].append(_wall(statement))
    baseline = statistics.median(samples["pass"])
    return {
        "runs": runs,
        "baseline_ms": baseline * 1000,
        "net_ms": {s: (statistics.median(samples[s]) - baseline) * 1000 for s in statements},
        "torch": {s: torch_imported(s) for s in statements},
    }


def serve_startup(runs: int, command: Callable[[int], list[str]], chat: dict[str, object]) -> dict[str, Any]:
    """Spawn → first 200 on /health, and spawn → first chat completion, medians over ``runs``.

    The model loads in the background after the server listens, so the second figure shows
    how long a first request waits for it.
    """
    health: list[float] = []
    first_answer: list[float] = []
    for _ in range(runs):
        argv = command(free_port())
        start = time.perf_counter()
        server = spawn("startup", argv)
        try:
            wait_ready(server, timeout=60, interval=0.005)
            health.append(time.perf_counter() - start)
            status, body = post_json(server.port, "/v1/chat/completions", chat, timeout=120)
            if status != 200:
                raise RuntimeError(f"first chat completion failed: {status} {body}")
            first_answer.append(time.perf_counter() - start)
        finally:
            stop(server)
    return {
        "runs": runs,
        "health_s": statistics.median(health),
        "health_all_s": health,
        "first_completion_s": statistics.median(first_answer),
    }
