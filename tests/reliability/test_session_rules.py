"""Rules indexed by session (issue 34, item 7): a request pays for its own session's rules and
the global ones, not for what every other session left behind.

A shared test server whose workers do not reset: thousands of sessions each leave one fault
rule and one scripted rule. A request of one session still gets exactly its own rules (and the
global ones), and what the fault and script books look at for it is that, not the thousands
(asserted on the books' own view: no timing is asserted). Chat p50 before and after, and
``/health`` meanwhile, are figures.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import httpx

from mockserver.app import create_app
from mockserver.config import Settings
from tests.reliability.conftest import Budget
from tests.reliability.harness import HealthProbe, thread_server

CHAT = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}


def _p50(client: httpx.Client, url: str, headers: dict[str, str], count: int = 60) -> float:
    took = []
    for _ in range(count):
        start = time.perf_counter()
        assert client.post(url, json=CHAT, headers=headers).status_code == 200
        took.append(time.perf_counter() - start)
    return statistics.median(took) * 1000


def test_a_request_pays_for_its_own_sessions_rules(budget: Budget, figures: dict[str, Any]) -> None:
    sessions = 10_000 if budget.name == "full" else 2_000
    app = create_app(Settings(backend="script", frozen_time=1_700_000_000.0))
    ctx = app.state.ctx
    ctx.script.add(text="The global answer.")
    ctx.chaos.rules.add({"faults": "latency.ttft=0"})  # a global rule: every request gets it
    with thread_server(app) as running:
        url = running.live.base_url + "/chat/completions"
        with httpx.Client(timeout=30) as client:
            _p50(client, url, {"x-mockserver-session": "s-7"}, 300)  # warm: caches, the journal, the allocator
            before = _p50(client, url, {"x-mockserver-session": "s-7"})
            with HealthProbe(running.live.url) as probe:
                for i in range(sessions):
                    # A fault that costs nothing when applied: the figure is what the rules cost.
                    ctx.chaos.rules.add({"faults": "latency.itl=0", "session": f"s-{i}"})
                ctx.script.extend([{"text": f"Answer {i}.", "session": f"s-{i}"} for i in range(sessions)])
            probe.check()
            after = _p50(client, url, {"x-mockserver-session": "s-7"})
            got = client.post(url, json=CHAT, headers={"x-mockserver-session": "s-7"})
            assert got.json()["choices"][0]["message"]["content"] == "Answer 7."
            assert got.headers["x-mockserver-faults"] == "latency.ttft=0; latency.itl=0"
            other = client.post(url, json=CHAT, headers={"x-mockserver-session": "nobody"})
            assert other.json()["choices"][0]["message"]["content"] == "The global answer."
            assert other.headers["x-mockserver-faults"] == "latency.ttft=0"
    # What each book looks at for one session's request: its own rule and the global one.
    looked = list(ctx.chaos.rules._candidates("s-7"))
    assert [r.session for r in looked] == [None, "s-7"]
    assert [r.session for r in ctx.script._book.for_session("s-7")] == ["s-7", None]
    figures[f"chat p50, one session, before / after {sessions} sessions' rules"] = f"{before:.2f} / {after:.2f} ms"
    figures["/health while the rules were added"] = probe.figures()
