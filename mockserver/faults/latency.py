"""Latency: seeded distributions and an LLM-shaped timeline, applied to the event stream.

A distribution (milliseconds) is written ``50`` or ``fixed:50``, ``uniform:LOW:HIGH``,
``normal:MEAN:SD`` (clipped at 0), or ``lognormal:MEDIAN:P99`` — each optionally with a last
``:CAP``. A timeline (``--latency``) joins named parts with ``;``::

    queue=fixed:5; ttft=lognormal:200:800:3000; per_prompt_token=0.2; itl=normal:20:5;
    stall_p=0.01; stall=fixed:1000; burst=4

``queue`` passes before anything, the first token after ``ttft + per_prompt_token × prompt
tokens``, every later one after ``itl`` (plus, with probability ``stall_p``, a ``stall``),
and tokens leave in bursts of ``burst``. A non-streamed request folds the same paced stream,
so it waits what its stream would have taken. ``--time-scale`` multiplies every delay (0.01
for fast CI). Draws come from the request's own generator: the same request waits the same.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from mockserver.faults.catalogue import Fault
from mockserver.spine.backend import aclose
from mockserver.spine.events import Event, RecordedFrame, RecordedHead, Started, TextDelta

__all__ = ["Distribution", "Timeline", "paced"]

_Z99 = 2.3263478740408408  # the standard normal's 99th percentile


@dataclass(frozen=True, slots=True)
class Distribution:
    kind: Literal["fixed", "uniform", "normal", "lognormal"]
    a: float  # fixed value, low, mean or median (ms)
    b: float = 0.0  # high, sd or p99 (ms)
    cap: float = math.inf

    @classmethod
    def parse(cls, text: str) -> Distribution:
        parts = [p.strip() for p in text.strip().split(":")]
        try:
            if len(parts) == 1:
                return cls("fixed", _ms(parts[0]))
            kind, numbers = parts[0], [_ms(p) for p in parts[1:]]
        except ValueError:
            raise ValueError(f"{text!r}: distributions are numbers of milliseconds") from None
        arity = {"fixed": 1, "uniform": 2, "normal": 2, "lognormal": 2}.get(kind)
        if arity is None or len(numbers) not in (arity, arity + 1):
            raise ValueError(
                f"{text!r}: expected fixed:MS, uniform:LOW:HIGH, normal:MEAN:SD or lognormal:MEDIAN:P99 (then :CAP)"
            )
        cap = numbers[arity] if len(numbers) > arity else math.inf
        a, b = numbers[0], numbers[1] if arity == 2 else 0.0
        if (kind == "uniform" and b < a) or (kind == "lognormal" and not 0 < a <= b):
            raise ValueError(f"{text!r}: needs LOW ≤ HIGH (uniform) or 0 < MEDIAN ≤ P99 (lognormal)")
        return cls(kind, a, b, cap)  # type: ignore[arg-type]

    def sample(self, rng: random.Random) -> float:
        """Milliseconds, never negative, never above the cap."""
        if self.kind == "fixed":
            value = self.a
        elif self.kind == "uniform":
            value = rng.uniform(self.a, self.b)
        elif self.kind == "normal":
            value = rng.gauss(self.a, self.b)
        else:  # median e^μ, 99th percentile e^(μ + z99·σ)
            sigma = math.log(self.b / self.a) / _Z99
            value = rng.lognormvariate(math.log(self.a), sigma)
        return min(max(0.0, value), self.cap)


def _ms(text: str) -> float:
    value = float(text)
    if value < 0 or math.isnan(value):
        raise ValueError(text)
    return value


@dataclass(frozen=True, slots=True)
class Timeline:
    queue: Distribution | None = None
    ttft: Distribution | None = None
    per_prompt_token: float = 0.0  # ms added to the first token per prompt token
    itl: Distribution | None = None
    stall_p: float = 0.0
    stall: Distribution | None = None
    burst: int = 1

    @classmethod
    def parse(cls, text: str) -> Timeline:
        parts: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(";"))):
            key, eq, value = (s.strip() for s in part.partition("="))
            if not eq:
                raise ValueError(f"{part!r}: expected name=value")
            if key in ("queue", "ttft", "itl", "stall"):
                parts[key] = Distribution.parse(value)
            elif key in ("per_prompt_token", "stall_p"):
                number = float(value)
                if not 0 <= number <= (1 if key == "stall_p" else math.inf):
                    raise ValueError(f"{part!r}: out of range")
                parts[key] = number
            elif key == "burst" and value.isdigit() and int(value) >= 1:
                parts[key] = int(value)
            else:
                raise ValueError(f"{part!r}: unknown part (queue, ttft, per_prompt_token, itl, stall_p, stall, burst)")
        return cls(**parts)

    def with_faults(self, faults: tuple[Fault, ...]) -> Timeline:
        """``latency.*`` faults override the matching part with a fixed delay."""
        overrides: dict[str, Any] = {
            fault.name.removeprefix("latency."): Distribution("fixed", fault["ms"])
            for fault in faults
            if fault.kind == "latency"
        }
        return replace(self, **overrides) if overrides else self

    @property
    def idle(self) -> bool:
        stalls = bool(self.stall_p) and self.stall is not None
        return (
            self.queue is None and self.ttft is None and self.itl is None and not self.per_prompt_token and not stalls
        )


async def paced(
    events: AsyncIterator[Event],
    timeline: Timeline,
    rng: random.Random,
    scale: float = 1.0,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> AsyncIterator[Event]:
    """``events`` on the timeline's schedule (see the module docstring)."""

    def draw(dist: Distribution | None) -> float:
        return dist.sample(rng) / 1000.0 * scale if dist is not None else 0.0

    async def wait(seconds: float) -> None:
        if seconds > 0:
            await sleep(seconds)

    try:
        async for event in _schedule(events, timeline, draw, wait, rng, scale):
            yield event
    finally:
        await aclose(events)


async def _schedule(
    events: AsyncIterator[Event],
    timeline: Timeline,
    draw: Callable[[Distribution | None], float],
    wait: Callable[[float], Awaitable[None]],
    rng: random.Random,
    scale: float,
) -> AsyncIterator[Event]:
    await wait(draw(timeline.queue))
    prompt_tokens = 0
    first = True
    owed = 0.0
    held: list[Event] = []
    texts = 0
    async for event in events:
        if isinstance(event, Started):
            prompt_tokens = max(prompt_tokens, event.prompt_tokens)
        # A token: the model's text, or a frame of a recording (replayed or proxied).
        if (isinstance(event, TextDelta) and not event.echo) or isinstance(event, RecordedFrame):
            if first:
                owed += draw(timeline.ttft) + timeline.per_prompt_token * prompt_tokens / 1000.0 * scale
                first = False
            else:
                owed += draw(timeline.itl)
                if timeline.stall_p and rng.random() < timeline.stall_p:
                    owed += draw(timeline.stall)
            texts += 1
        held.append(event)
        if texts >= timeline.burst or not isinstance(event, TextDelta | Started | RecordedHead | RecordedFrame):
            await wait(owed)
            owed, texts = 0.0, 0
            for ready in held:
                yield ready
            held = []
    await wait(owed)
    for ready in held:
        yield ready
