"""The figures of bench/wires.py: per-round ratios wire / chat, their median and spread, how busy
the machine was meanwhile, and the report as a markdown table.

A round's ratio divides a wire's window by chat's window of the same round, so what the machine
did meanwhile falls on both; the median of the ratios is the figure and their interquartile
range (p25–p75) is how far it can be trusted. A cell is shown within the issue's 1.10 only when
its p75 is (most rounds agree), beyond when its p25 is beyond, and unresolved otherwise.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from dataclasses import dataclass
from typing import Any

from bench.loadgen import system_busy
from bench.stats import percentile

__all__ = ["Cell", "Load", "Meter", "Phase", "report"]

LIMIT = 1.10  # issue 29: a wire's scripted answer within 10% of chat's


@dataclass(frozen=True)
class Cell:
    """One wire beside chat in one shape at one concurrency: the figure of every round."""

    wire: str
    shape: str
    concurrency: int
    chat: list[float]
    other: list[float]

    @property
    def ratios(self) -> list[float]:
        return [o / c for c, o in zip(self.chat, self.other, strict=True)]

    def spread(self) -> tuple[float, float, float]:
        """p25, median, p75 of the per-round ratios."""
        ratios = self.ratios
        return percentile(ratios, 25), statistics.median(ratios), percentile(ratios, 75)

    def verdict(self) -> str:
        low, _, high = self.spread()
        if high <= LIMIT:
            return "within"
        return "beyond" if low > LIMIT else "unresolved"


@dataclass(frozen=True)
class Load:
    """How busy the machine was over a phase."""

    seconds: float
    busy_cores: float  # every process, from /proc/stat: cores' worth of busy time on average
    server_cores: float  # the measured server's own share of it
    bench_cores: float  # this process and its waited children: the load generator (wrk, or threads here)
    server_wait: float  # seconds the server was runnable but waited for a CPU, per second of its CPU


@dataclass(frozen=True)
class Meter:
    """The counters at a phase's start; :meth:`stop` turns them into its :class:`Load`."""

    pid: int
    started: float
    busy: float
    server_cpu: float
    server_wait: float
    bench_cpu: float

    @staticmethod
    def _bench() -> float:
        own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime

    @staticmethod
    def _wait(pid: int) -> float:
        with open(f"/proc/{pid}/schedstat") as f:  # run time, run-queue wait (ns), timeslices
            return int(f.read().split()[1]) / 1e9

    @classmethod
    def start(cls, pid: int, server_cpu: float) -> Meter:
        return cls(pid, time.perf_counter(), system_busy(), server_cpu, cls._wait(pid), cls._bench())

    def stop(self, server_cpu: float) -> Load:
        seconds = time.perf_counter() - self.started
        cpu = server_cpu - self.server_cpu
        return Load(
            seconds,
            (system_busy() - self.busy) / seconds,
            cpu / seconds,
            (self._bench() - self.bench_cpu) / seconds,
            (self._wait(self.pid) - self.server_wait) / max(cpu, 1e-9),
        )


@dataclass(frozen=True)
class Phase:
    """One measure over every cell, on its own server."""

    measure: str
    unit: str
    cells: list[Cell]
    load: Load

    def raw(self) -> dict[str, Any]:
        cells = [
            {"wire": c.wire, "shape": c.shape, "concurrency": c.concurrency, "chat": c.chat, "wire_figures": c.other}
            for c in self.cells
        ]
        return {"measure": self.measure, "unit": self.unit, "cells": cells, "load": self.load.__dict__}


def _rows(phases: list[Phase]) -> list[str]:
    rows = [
        "| wire | shape | c | measure | chat /request | wire /request | wire / chat (median) | p25–p75 | rounds"
        " | ≤ 1.10 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = {(c.wire, c.shape, c.concurrency): i for i, c in enumerate(phases[0].cells)} if phases else {}
    cells = sorted(
        ((cell, phase) for phase in phases for cell in phase.cells),
        key=lambda pair: (order.get((pair[0].wire, pair[0].shape, pair[0].concurrency), 0), pair[1].measure),
    )
    for cell, phase in cells:
        low, mid, high = cell.spread()
        chat, other = statistics.median(cell.chat), statistics.median(cell.other)
        rows.append(
            f"| {cell.wire} | {cell.shape} | {cell.concurrency} | {phase.unit} | {chat:.3f} | {other:.3f} "
            f"| {mid:.3f} | {low:.3f}–{high:.3f} | {len(cell.chat)} | {cell.verdict()} |"
        )
    return rows


def report(phases: list[Phase], busy_cores: float, seconds: float, command: str) -> str:
    """The table and, under it, the command and the machine's load during each phase."""
    lines = [f"`{command}`", "", *_rows(phases), ""]
    lines.append(
        f"Machine ({os.cpu_count()} cores): {busy_cores:.2f} cores busy on average over {seconds:.0f} s "
        f"(load average now {' / '.join(f'{v:.2f}' for v in os.getloadavg())})."
    )
    for phase in phases:
        load = phase.load
        others = max(0.0, load.busy_cores - load.server_cores - load.bench_cores)
        lines.append(
            f"- {phase.measure}: {load.seconds:.0f} s, {load.busy_cores:.2f} cores busy: the server "
            f"{load.server_cores:.2f}, the load generator {load.bench_cores:.2f}, other processes {others:.2f}; "
            f"the server waited {load.server_wait:.2f} s for a CPU per second of its CPU time."
        )
    return "\n".join(lines)
