"""What the figures were measured on: the machine, how busy it was, the software and versions."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.loadgen import system_busy
from bench.procs import ROOT

__all__ = ["PACKAGES", "busy_now", "describe", "load_average"]

PACKAGES = (
    "mockserver",
    "starlette",
    "uvicorn",
    "uvloop",
    "httptools",
    "pydantic",
    "httpx",
    "vcrpy",
    "torch",
    "tokenizers",
    "safetensors",
)


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def busy_now(seconds: float = 1.0) -> float:
    """CPU-seconds per second the machine spends busy right now, before we add any load."""
    first = system_busy()
    time.sleep(seconds)
    return (system_busy() - first) / seconds


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024**2
    except (OSError, ValueError):
        pass
    return 0.0


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def describe(command: str) -> dict[str, Any]:
    """The machine and software, read before any server starts."""
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    fast = all(importlib.util.find_spec(m) is not None for m in ("uvloop", "httptools"))
    return {
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": (_git("rev-parse", "--short", "HEAD") or "unknown") + (" (with local changes)" if dirty else ""),
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": _memory_gib(),
        "load_before": load_average(),
        "busy_before": busy_now(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "versions": {name: _version(name) for name in PACKAGES},
        "loop_note": "uvicorn's loop/http 'auto' resolves to uvloop/httptools"
        + (" (both installed)" if fast else " — **but uvloop/httptools are missing**: asyncio/h11"),
        "executable": sys.executable,
    }
