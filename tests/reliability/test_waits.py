"""A client that leaves during a wait is noticed there (issue 34, item 4).

Clients ask for the model's answer behind a ten-minute ``latency.queue`` or ``latency.ttft``
delay, streamed or not, and hang up after a moment. Each is journaled 499
``client_disconnect`` at once (the server does not sleep the delay out), and the model stops:
the server's CPU falls back to idle instead of making answers for nobody. ``/health`` is probed
meanwhile (its p99 is a figure, never asserted).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reliability.harness import HealthProbe, child_server

WAITS = ["latency.queue", "latency.ttft"]
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _leave(url: str, wait: str, stream: bool, n: int) -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": f"Wait {n} for {wait}, stream={stream}."}],
        "max_tokens": 8000,
        "ignore_eos": True,  # a long answer: one made for nobody would keep a core busy
        "stream": stream,
    }
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            url + "/v1/chat/completions",
            json=body,
            headers={"x-mockserver-fault": f"{wait},ms=600000"},
            timeout=httpx.Timeout(30.0, read=0.3),
        )


def test_clients_that_leave_during_waits_are_noticed_and_cost_nothing_more(
    tmp_path: Path, figures: dict[str, Any]
) -> None:
    with child_server([], tmp_path / "server.log") as server:
        with HealthProbe(server.url) as probe:
            for n in range(4):
                for wait in WAITS:
                    _leave(server.url, wait, stream=bool(n % 2), n=n)
            entries: list[dict[str, Any]] = []
            for _ in range(100):  # each is noticed within a moment of its hang-up
                entries = httpx.get(server.url + "/__mockserver/journal", timeout=30).json()["entries"]
                if len(entries) == 8 and all(e["ended"] != "pending" for e in entries):
                    break
                time.sleep(0.1)
        assert [(e["status"], e["ended"]) for e in entries] == [(499, "client_disconnect")] * 8
        assert max(e["duration"] for e in entries) < 10  # not the ten minutes asked for
        before = _cpu_seconds(server.pid)
        time.sleep(2.0)
        spent = _cpu_seconds(server.pid) - before
        assert spent < 1.0, f"the server spent {spent:.2f} s of CPU in 2 s after every client had left"
        assert not probe.failures
        assert (
            httpx.post(
                server.url + "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "Still here?"}], "max_tokens": 4},
                timeout=60,
            ).status_code
            == 200
        )
        figures["/health while 8 clients left during 10-minute waits"] = probe.figures()
        figures["server CPU in the 2 s after they left (s)"] = round(spent, 3)
