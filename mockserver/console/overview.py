"""The server's state as the console shows it, read-only: rules, faults, sessions, cassettes, metrics.

What the admin API lists one endpoint at a time, in one answer for the page's "server" tab.
Sessions are the ones the journal and the rules name (a session exists only in what it left).
"""

from __future__ import annotations

from typing import Any

from mockserver.cassettes.library import Library
from mockserver.context import ServerContext
from mockserver.http.metrics import Metrics

__all__ = ["overview"]


async def overview(ctx: ServerContext, metrics: Metrics | None, library: Library | None) -> dict[str, Any]:
    faults = await ctx.chaos.rules.alist()
    script = await ctx.script.arules()
    entries = await ctx.chaos.journal.aentries()
    sessions: dict[str, dict[str, int]] = {}
    for entry in entries:
        if entry.session is not None:
            seen = sessions.setdefault(entry.session, {"requests": 0, "rules": 0, "faults": 0})
            seen["requests"] += 1
    for rule in script:
        if rule.session is not None:
            sessions.setdefault(rule.session, {"requests": 0, "rules": 0, "faults": 0})["rules"] += 1
    for fault in faults:
        if fault.session is not None:
            sessions.setdefault(fault.session, {"requests": 0, "rules": 0, "faults": 0})["faults"] += 1
    return {
        "rules": [r.to_json() for r in script],
        "faults": {"defaults": [f.render() for f in ctx.chaos.rules.defaults], "rules": [f.to_json() for f in faults]},
        "sessions": [{"session": name, **counts} for name, counts in sorted(sessions.items())],
        "cassettes": _cassettes(library),
        "metrics": _metrics(metrics),
        "journal": {"entries": len(entries), "size": ctx.chaos.journal.size},
    }


def _cassettes(library: Library | None) -> dict[str, Any] | None:
    if library is None:
        return None
    return {"directory": str(library.options.directory), **library._summary().to_json()}  # the counts a reload reports


def _metrics(metrics: Metrics | None) -> dict[str, Any] | None:
    """Requests per endpoint and status, tokens, streams and faults counted since start."""
    if metrics is None:
        return None
    requests: dict[str, dict[str, int]] = {}
    for (endpoint, method, status, _profile), count in metrics.requests.items():
        by = requests.setdefault(f"{method} {endpoint}", {})
        by[status] = by.get(status, 0) + count
    tokens: dict[str, int] = {}
    for (_endpoint, _profile, kind), count in metrics.tokens.items():
        tokens[kind] = tokens.get(kind, 0) + count
    return {
        "in_flight": metrics.in_flight,
        "requests": requests,
        "tokens": tokens,
        "streams": sum(metrics.streams.values()),
        "faults": {f"{endpoint} {name}": count for (endpoint, name), count in sorted(metrics.faults.items())},
    }
