"""Streaming traffic for the load and live-reconfiguration tests: a table of requests, their
non-stream twins fetched on a quiet server, and clients that stream them in a loop and hold
every answer against its twin."""

from __future__ import annotations

import asyncio
import random
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.reliability.harness import CHECKS, Json, check_twin

MODEL = "gpt-4o-mini"
PROMPTS = (
    "Tell me about the sea.",
    "Write a haiku on autumn.",
    "List three colours.",
    "Describe a quiet town at night, in detail.",
    "¿Qué tiempo hace hoy? Réponds en français — 日本語でも。",
    "Explain recursion to a child.",
)


@dataclass(frozen=True)
class Call:
    """One request of the table: its path and non-stream body."""

    path: str
    body: Json

    def streamed(self) -> Json:
        body: Json = {**self.body, "stream": True}
        if self.path != "/responses":
            body["stream_options"] = {"include_usage": True}
        return body


def table(size: int = 36) -> list[Call]:
    """Chat, completions and Responses requests: different prompts, lengths, seeds (or none:
    derived from the body), temperatures, n and logprobs."""
    rng = random.Random(20241122)
    calls = []
    for i in range(size):
        prompt = PROMPTS[i % len(PROMPTS)]
        tokens = rng.choice((4, 8, 16, 24, 32))
        sampling: Json = {"temperature": rng.choice((0.0, 0.7, 1.0))}
        if i % 4:
            sampling["seed"] = rng.randrange(1_000_000)
        kind = i % 3
        if kind == 0:
            body: Json = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "max_tokens": tokens}
            if i % 2:
                body |= {"logprobs": True, "top_logprobs": 2}
            if i % 5 == 0:
                body["n"] = 2
            calls.append(Call("/chat/completions", body | sampling))
        elif kind == 1:
            body = {"model": MODEL, "prompt": prompt, "max_tokens": tokens}
            if i % 2:
                body["logprobs"] = 1
            if i % 5 == 0:
                body["n"] = 2
            calls.append(Call("/completions", body | sampling))
        else:  # not stored: a stored twin would take the id its stream wants
            body = {"model": MODEL, "input": prompt, "max_output_tokens": max(16, tokens), "store": False}
            calls.append(Call("/responses", body | sampling))
    return calls


async def twins(base_url: str, calls: list[Call], headers: Mapping[str, str] | None = None) -> list[Json]:
    """Each call's non-stream answer, one at a time (a quiet server)."""
    found = []
    async with httpx.AsyncClient(base_url=base_url, timeout=60, headers=dict(headers or {})) as client:
        for call in calls:
            response = await client.post(call.path, json=call.body)
            assert response.status_code == 200, response.text[:500]
            found.append(response.json())
    return found


@dataclass
class Tally:
    streams: int = 0
    plain: int = 0
    events: int = 0
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    durations: list[float] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.error_count += 1
        if len(self.errors) < 10:
            self.errors.append(what)


async def drive(
    base_url: str,
    calls: list[Call],
    expected: list[Json],
    clients: int,
    seconds: float,
    *,
    stream_share: float = 0.85,
    headers: Mapping[str, str] | None = None,
    tally: Tally | None = None,
    seed: int = 0,
) -> Tally:
    """``clients`` concurrent clients, each sending one request after another for ``seconds``
    (a request started before the end runs to its end, within its timeout)."""
    tally = tally or Tally()
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients + 8, max_keepalive_connections=clients + 8)
    timeout = httpx.Timeout(120.0, connect=30.0)
    async with httpx.AsyncClient(
        base_url=base_url, timeout=timeout, limits=limits, headers=dict(headers or {})
    ) as http:

        async def client(number: int) -> None:
            rng = random.Random(seed * 100_003 + number)
            while time.monotonic() < deadline:
                k = rng.randrange(len(calls))
                call, twin = calls[k], expected[k]
                start = time.monotonic()
                streamed = rng.random() < stream_share
                steps: list[str] = []  # httpcore's trace: a new connection or a reused one, how far it got

                async def trace(name: str, info: Any, steps: list[str] = steps, start: float = start) -> None:
                    steps.append(f"{name}@{time.monotonic() - start:.2f}")

                extensions = {"trace": trace}
                try:
                    if streamed:
                        async with http.stream(
                            "POST", call.path, json=call.streamed(), extensions=extensions
                        ) as response:
                            raw = await response.aread()
                        assert response.status_code == 200, f"{response.status_code}: {raw[:300]!r}"
                        tally.events += CHECKS[call.path](raw, twin).events
                        tally.streams += 1
                    else:
                        response = await http.post(call.path, json=call.body, extensions=extensions)
                        assert response.status_code == 200, f"{response.status_code}: {response.text[:300]}"
                        check_twin(call.path, response.json(), twin)
                        tally.plain += 1
                except Exception as exc:  # counted, and the first few kept whole
                    tally.fail(_described(exc, call.path, k, streamed, time.monotonic() - start, steps))
                tally.durations.append(time.monotonic() - start)

        await asyncio.wait_for(asyncio.gather(*(client(i) for i in range(clients))), seconds + 180)
    return tally


def _described(exc: BaseException, path: str, k: int, streamed: bool, elapsed: float, steps: list[str]) -> str:
    """The error and its causes, one line each, and the connection's last steps: enough to
    tell a server's fault from a client's."""
    fresh = "new" if any(step.startswith("connection.connect_tcp") for step in steps) else "reused"
    lines = [
        f"{path} #{k} ({'stream' if streamed else 'plain'}, after {elapsed:.2f} s, {fresh} connection):",
        " ".join(steps[-4:]),
    ]
    seen: BaseException | None = exc
    while seen is not None and len(lines) < 6:
        lines.append("".join(traceback.format_exception_only(seen)).strip()[:400])
        seen = seen.__cause__ or seen.__context__
    return "\n  ".join(lines)


def summary(tally: Tally) -> dict[str, Any]:
    durations = sorted(tally.durations) or [0.0]
    return {
        "streams checked": tally.streams,
        "non-stream checked": tally.plain,
        "events checked": tally.events,
        "errors": tally.error_count,
        "request p50/p99 s": f"{durations[len(durations) // 2]:.3f}/{durations[int(len(durations) * 0.99)]:.3f}",
    }
