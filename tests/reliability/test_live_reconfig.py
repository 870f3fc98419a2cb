"""Live reconfiguration: while streams run, the admin API adds and drops fault rules,
per-session faults and scripted answers, over and over. Streams they do not apply to lose no
event (each held against its non-stream twin); streams they do apply to get exactly the
configured behaviour or a clean error, never a server error.

The churn is scoped two ways: by session (``x-mockserver-session: chaos``) and, for rules
without a session, by a model the steady clients never ask for.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
from typing import Any

import httpx

from mockserver.app import create_app
from mockserver.config import Settings
from tests.reliability.conftest import Budget
from tests.reliability.harness import Json, described, error_envelope, errors_logged, frames, thread_server
from tests.reliability.workload import MODEL, Tally, drive, summary, table, twins

CHAOS = "chaos"
CHAOS_MODEL = "chaos-model"
STEADY = {"x-mockserver-session": "steady"}

# What the churn adds: (admin path, body, session header or None).
CHANGES: list[tuple[str, Json, str | None]] = [
    ("/faults", {"faults": "stream.cut_after=2"}, CHAOS),
    ("/faults", {"faults": "latency.itl=2; stream.split_utf8"}, CHAOS),
    ("/rules", {"faults": "http.503", "times": 2}, CHAOS),
    ("/rules", {"faults": "stream.error_at=3", "stream": True}, CHAOS),
    ("/rules", {"faults": "http.429", "model": CHAOS_MODEL}, None),
    ("/rules", {"faults": "stream.no_usage; stream.double_done", "model": CHAOS_MODEL, "stream": True}, None),
    ("/answers", {"text": "Scripted for chaos."}, CHAOS),
    ("/answers", {"sequence": [{"text": "one"}, {"refusal": "no"}], "then": "repeat_last"}, CHAOS),
    ("/answers", {"text": "Scripted by model.", "model": CHAOS_MODEL}, None),
]


async def _churn(admin: str, deadline: float, counts: dict[str, int]) -> None:
    """Add changes, sometimes drop one by id, sometimes clear or reset the chaos session."""
    rng = random.Random(5)
    added: list[str] = []  # paths of single rules to delete (/rules/{id}, /answers/{id})
    async with httpx.AsyncClient(base_url=admin, timeout=30) as http:
        for step in itertools.count():
            if time.monotonic() >= deadline or step >= 100_000:
                break
            roll = rng.random()
            if roll < 0.5:
                path, body, session = rng.choice(CHANGES)
                headers = {"x-mockserver-session": session} if session else {}
                response = await http.post(path, json=body, headers=headers)
                assert response.status_code == 200, response.text
                made = response.json()
                for rule in made.get("rules", [made]):
                    if "id" in rule and path != "/faults":
                        added.append(f"{path}/{rule['id']}")
            elif roll < 0.7 and added:
                gone = await http.delete(added.pop(rng.randrange(len(added))))
                assert gone.status_code in (200, 404), gone.text  # 404: a clear got it first
            elif roll < 0.8:
                path = rng.choice(["/faults", "/rules", "/answers"])
                cleared = await http.delete(path, headers={"x-mockserver-session": CHAOS})
                assert cleared.status_code == 200, cleared.text
            elif roll < 0.85:
                reset = await http.post("/reset", params={"session": CHAOS})
                assert reset.status_code == 200, reset.text
            else:
                listed = await http.get(rng.choice(["/rules", "/answers", "/faults", "/journal"]))
                assert listed.status_code == 200, listed.text
            counts["admin calls"] += 1
            await asyncio.sleep(rng.uniform(0, 0.02))


SCRIPTED = frozenset({"Scripted for chaos.", "Scripted by model.", "one", "no"})


def _said(response: httpx.Response, stream: bool) -> str:
    """The answer's text (or refusal), streamed or not; "" when it cannot be read whole."""
    try:
        if not stream:
            message = response.json()["choices"][0]["message"]
            return str(message.get("content") or message.get("refusal") or "")
        said = []
        for f in frames(response.content):
            if f.data.startswith("{"):
                for choice in json.loads(f.data).get("choices", []):
                    delta = choice.get("delta", {})
                    said.append(delta.get("content") or delta.get("refusal") or "")
        return "".join(said)
    except (ValueError, KeyError, IndexError):
        return ""


async def _chaos_clients(base_url: str, clients: int, deadline: float, counts: dict[str, int]) -> None:
    """Requests the churn does apply to: any answer is fine but a 5xx or an error outside
    the envelope (a 503 is the configured fault's, and says so)."""

    async def client(number: int) -> None:
        rng = random.Random(number)
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
            for _ in range(100_000):
                if time.monotonic() >= deadline:
                    return
                model = rng.choice([MODEL, CHAOS_MODEL])
                session = {"x-mockserver-session": CHAOS} if model == MODEL or rng.random() < 0.5 else {}
                stream = rng.random() < 0.7
                body: Json = {"model": model, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 12}
                if stream:
                    body |= {"stream": True, "stream_options": {"include_usage": True}}
                response = await http.post("/chat/completions", json=body, headers=session)
                faults = response.headers.get("x-mockserver-faults", "")
                if response.status_code >= 400:
                    error_envelope(response.json())
                    configured = "http." in faults or response.status_code == 429
                    assert configured, f"{response.status_code} without a fault: {response.text[:300]}"
                    counts["chaos errors (configured)"] += 1
                    continue
                if stream:
                    seen = [f.data for f in frames(response.content)]
                    counts["chaos streams cut or broken"] += "[DONE]" not in seen
                counts["chaos requests"] += 1
                counts["chaos with faults"] += bool(faults)
                counts["chaos scripted"] += _said(response, stream) in SCRIPTED

    await asyncio.gather(*(client(i) for i in range(clients)))


def test_reconfiguring_under_load_loses_no_events_of_other_streams(budget: Budget, figures: dict[str, Any]) -> None:
    with thread_server(create_app(Settings(frozen_time=1_700_000_000.0))) as server:
        base_url, admin = server.live.base_url, server.live.url + "/__mockserver"
        calls = table(24)
        expected = asyncio.run(twins(base_url, calls, STEADY))
        counts: dict[str, int] = dict.fromkeys(
            ["admin calls", "chaos requests", "chaos errors (configured)", "chaos with faults", "chaos scripted",
             "chaos streams cut or broken"],
            0,
        )  # fmt: skip
        steady, unscoped = Tally(), Tally()

        async def everything() -> None:
            deadline = time.monotonic() + budget.reconfig_seconds
            half = max(1, budget.reconfig_clients // 2)
            await asyncio.gather(
                drive(base_url, calls, expected, half, budget.reconfig_seconds, headers=STEADY, tally=steady, seed=3),
                drive(base_url, calls, expected, half, budget.reconfig_seconds, tally=unscoped, seed=4),
                _churn(admin, deadline, counts),
                _chaos_clients(base_url, max(2, budget.reconfig_clients // 4), deadline, counts),
            )

        with errors_logged() as errors:
            asyncio.run(asyncio.wait_for(everything(), budget.reconfig_seconds + 240))
        for path in ("/rules", "/answers", "/faults"):  # leave the server clean
            assert httpx.delete(admin + path, timeout=10).status_code == 200
        assert httpx.get(server.live.url + "/health", timeout=10).status_code == 200

    figures.update(
        **{f"steady (session) {k}": v for k, v in summary(steady).items() if k != "request p50/p99 s"},
        **{f"steady (no session) {k}": v for k, v in summary(unscoped).items() if k != "request p50/p99 s"},
        **counts,
    )
    assert not errors, described(errors)
    assert steady.error_count == 0, steady.errors
    assert unscoped.error_count == 0, unscoped.errors
    assert steady.streams and unscoped.streams
    # The churn did change what the chaos clients got: the test is not vacuous.
    assert counts["admin calls"] > 10 and counts["chaos with faults"] + counts["chaos errors (configured)"] > 0
