"""Load: many concurrent streaming clients for a while → no errors, no lost or reordered
events, and the server's resident memory does not grow.

The server is a child process (its RSS is its own). Each answer — streamed or not — is held
against the non-stream twin fetched on the quiet server before the load: same text, usage,
finish_reason, and (with logprobs) the same tokens in the same order. The journal and the
response store are bounded caches; they are made small so the warm-up fills them, and what
grows after that is a leak.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.reliability.conftest import Budget
from tests.reliability.harness import FROZEN, child_server, proc_status
from tests.reliability.workload import Tally, drive, summary, table, twins

GROWTH_LIMIT = 0.10


def test_streaming_load_loses_nothing_and_does_not_grow(
    tmp_path: Path, budget: Budget, figures: dict[str, Any]
) -> None:
    args = ["--frozen-time", FROZEN, "--journal-size", "256", "--store-size", "256"]
    with child_server(args, tmp_path / "server.log") as child:
        calls = table()
        expected = asyncio.run(twins(child.base_url, calls))
        warm = asyncio.run(drive(child.base_url, calls, expected, budget.load_clients, budget.load_warmup, seed=1))
        assert warm.error_count == 0, warm.errors
        rss_warm = proc_status(child.pid, "VmRSS")
        tally = Tally()
        asyncio.run(
            drive(child.base_url, calls, expected, budget.load_clients, budget.load_seconds, tally=tally, seed=2)
        )
        rss_end = proc_status(child.pid, "VmRSS")
        growth = (rss_end - rss_warm) / rss_warm
        figures.update(
            clients=budget.load_clients,
            seconds=budget.load_seconds,
            **summary(tally),
            **{"RSS after warm-up / at end (MiB)": f"{rss_warm / 1024:.1f} / {rss_end / 1024:.1f}"},
            **{"RSS growth": f"{growth:+.1%}"},
        )
        assert tally.error_count == 0, tally.errors
        assert tally.streams >= budget.load_clients  # every client streamed at least once
        assert "Traceback" not in child.output(), child.output()[-3000:]
        assert growth < GROWTH_LIMIT, f"RSS grew {growth:.1%} ({rss_warm} kB → {rss_end} kB)"
