"""Small statistics shared by the load generator and the report (stdlib only)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["percentile", "summarize"]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/max/mean of durations given in seconds, returned in milliseconds."""
    if not seconds:
        return {"n": 0, "p50": math.nan, "p90": math.nan, "p99": math.nan, "max": math.nan, "mean": math.nan}
    ms = [s * 1000.0 for s in seconds]
    return {
        "n": len(ms),
        "p50": percentile(ms, 50),
        "p90": percentile(ms, 90),
        "p99": percentile(ms, 99),
        "max": max(ms),
        "mean": statistics.fmean(ms),
    }
