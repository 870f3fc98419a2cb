"""Latency without a server: distributions, and timelines pacing an event stream on a fake sleep."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from mockserver.faults.latency import Distribution, Timeline, paced
from mockserver.spine.events import Event, Finished, Started, TextDelta, Usage


@pytest.mark.parametrize(
    ("spec", "quantiles"),
    [
        ("uniform:10:50", {0.25: 20.0, 0.5: 30.0, 0.75: 40.0}),
        ("normal:100:20", {0.5: 100.0, 0.8413: 120.0}),
        ("lognormal:200:1500", {0.5: 200.0, 0.99: 1500.0}),
    ],
)
def test_distributions_match_their_parameters(spec: str, quantiles: dict[float, float]) -> None:
    dist = Distribution.parse(spec)
    rng = random.Random(42)
    samples = sorted(dist.sample(rng) for _ in range(10_000))
    for q, expected in quantiles.items():
        assert samples[int(q * len(samples))] == pytest.approx(expected, rel=0.05), q
    assert Distribution.parse("fixed:30").sample(rng) == 30.0
    capped = Distribution.parse("lognormal:200:1500:400")
    assert max(capped.sample(rng) for _ in range(2000)) == 400.0


@pytest.mark.parametrize("bad", ["lognormal:0:10", "uniform:5:1", "gamma:1:2", "normal:1", "fixed:-3"])
def test_bad_distributions_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        Distribution.parse(bad)


async def _events(tokens: int, prompt_tokens: int = 10) -> Any:
    yield Started(0, prompt_tokens)
    for i in range(tokens):
        yield TextDelta(0, f"t{i}")
    yield Finished(0, "length")
    yield Usage(prompt_tokens, tokens)


def _pace(timeline: Timeline, tokens: int, scale: float = 1.0) -> tuple[list[float], list[list[Event]]]:
    sleeps: list[float] = []
    batches: list[list[Event]] = [[]]

    async def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))
        batches.append([])

    async def run() -> None:
        async for event in paced(_events(tokens), timeline, random.Random(0), scale, sleep):
            batches[-1].append(event)

    asyncio.run(run())
    return sleeps, [b for b in batches if b]


def test_timeline_queue_ttft_per_prompt_token_and_itl() -> None:
    timeline = Timeline.parse("queue=5; ttft=100; per_prompt_token=2; itl=10")
    sleeps, _ = _pace(timeline, 4)
    assert sleeps == [0.005, 0.12, 0.01, 0.01, 0.01]  # ttft = 100 + 2 × 10 prompt tokens
    scaled, _ = _pace(timeline, 4, scale=0.1)
    assert scaled == [0.0005, 0.012, 0.001, 0.001, 0.001]


def test_timeline_bursts_release_tokens_together() -> None:
    sleeps, batches = _pace(Timeline.parse("itl=10; burst=3"), 7)
    texts = [[e.text for e in b if isinstance(e, TextDelta)] for b in batches]
    assert [t for t in texts if t] == [["t0", "t1", "t2"], ["t3", "t4", "t5"], ["t6"]]
    assert sleeps == [0.02, 0.03, 0.01]  # the first token has no itl; each burst waits its tokens' share


def test_stalls_come_with_their_probability() -> None:
    sleeps, _ = _pace(Timeline.parse("itl=1; stall_p=0.5; stall=1000"), 400)
    stalls = sum(1 for s in sleeps if s > 0.5)
    assert 150 < stalls < 250
