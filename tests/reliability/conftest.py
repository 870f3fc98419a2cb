"""The reliability suite: load, a disconnect storm, fuzzing, crash safety, live reconfiguration.

Every test here is marked ``reliability`` and sized by :data:`BUDGET`: the short sizes by
default (the suite runs in CI as part of ``make test`` and must stay around a minute), the
issue's sizes with ``MOCKSERVER_RELIABILITY=full`` (``make reliability``). All traffic stays
on 127.0.0.1; every loop is bounded in count and in time; every child process is killed in a
``finally``. What each test measured is printed at the end of the run ("reliability figures").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Budget:
    """How big each test runs."""

    name: str
    # load: concurrent streaming clients, warm-up and measured seconds
    load_clients: int
    load_warmup: float
    load_seconds: float
    # disconnect storm: clients that hang up mid-stream, how many at a time
    storm_clients: int
    storm_concurrency: int
    # fuzzing: hypothesis examples per endpoint; schemathesis examples per operation (0: off)
    fuzz_examples: int
    schemathesis_examples: int
    # crash safety: SIGKILL rounds for the recorder and for the SQLite store
    crash_rounds: int
    # live reconfiguration: streaming clients, seconds of admin churn
    reconfig_clients: int
    reconfig_seconds: float


SHORT = Budget(
    name="short",
    load_clients=24,
    load_warmup=2.0,
    load_seconds=5.0,
    storm_clients=150,
    storm_concurrency=50,
    fuzz_examples=40,
    # tests/contract/test_openapi.py already runs the small schemathesis pass in CI.
    schemathesis_examples=0,
    crash_rounds=1,
    reconfig_clients=16,
    reconfig_seconds=4.0,
)
FULL = Budget(
    name="full",
    load_clients=200,
    load_warmup=10.0,
    load_seconds=60.0,
    storm_clients=1000,
    storm_concurrency=200,
    fuzz_examples=300,
    schemathesis_examples=100,
    crash_rounds=8,
    reconfig_clients=100,
    reconfig_seconds=30.0,
)


def _budget() -> Budget:
    chosen = os.environ.get("MOCKSERVER_RELIABILITY", "short").strip().lower() or "short"
    if chosen not in ("short", "full"):
        raise pytest.UsageError(f"MOCKSERVER_RELIABILITY is 'short' or 'full', not {chosen!r}")
    return FULL if chosen == "full" else SHORT


BUDGET = _budget()

_FIGURES: dict[str, dict[str, Any]] = {}


@pytest.fixture
def budget() -> Budget:
    return BUDGET


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """What a test measured, printed in the "reliability figures" summary."""
    found: dict[str, Any] = {}
    yield found
    if found:
        _FIGURES[request.node.name] = found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.reliability)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    terminalreporter.section(f"reliability figures ({BUDGET.name})")
    for name, found in _FIGURES.items():
        terminalreporter.write_line(f"{name}:")
        for key, value in found.items():
            terminalreporter.write_line(f"    {key}: {value}")
