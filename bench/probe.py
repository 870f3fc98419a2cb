"""What the abuse benchmarks watch while they abuse a server: ``/health``'s latency, sampled in
a thread (:class:`Probe`), and the server's memory (:func:`_status`). A leaf both
``bench/abuse.py`` and ``bench/abuse_cases.py`` read, so neither imports the other's tools."""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path

import httpx

__all__ = ["Probe", "_status"]


def _status(pid: int, key: str) -> int:
    """kB from /proc/<pid>/status (``VmRSS``, ``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return int(value.split()[0])
    raise KeyError(key)


class Probe:
    """``/health`` latencies, sampled in a thread on one keep-alive connection until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url + "/health"
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self._stop.is_set():
                start = time.perf_counter()
                client.get(self.url).raise_for_status()
                self.samples.append(time.perf_counter() - start)
                time.sleep(0.005)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)

    def figures(self) -> dict[str, float]:
        cuts = statistics.quantiles(self.samples, n=100, method="inclusive")
        return {"p50_ms": statistics.median(self.samples) * 1000, "p99_ms": cuts[98] * 1000, "n": len(self.samples)}
