"""What each process of the cross-process contract tests runs (spawned: a fresh interpreter
that imports only this, so it must stay light — no pytest, no fixtures).

Every worker opens its own State on the URL, waits at the barrier so all of them start
together, does its calls as fast as it can and hands back what each call returned.
"""

from __future__ import annotations

import asyncio
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

from mockserver.clock import SystemClock
from mockserver.state.base import Draw
from mockserver.state.open import open_state

__all__ = ["count", "draw"]


async def _count(url: str, key: str, times: int, barrier: Barrier) -> list[int]:
    state = open_state(url, SystemClock())
    await state.ping()
    try:
        barrier.wait(30)
        got: list[int] = []
        for i in range(times):  # both ways a count is taken: add, and exchange's counts
            if i % 2:
                got.append(await state.add(key))
            else:
                got += (await state.exchange((), (key,)))[1]
        return got
    finally:
        await state.close()
        await state.records.close()


async def _draw(url: str, key: str, times: int, barrier: Barrier) -> list[bool]:
    state = open_state(url, SystemClock())
    await state.ping()
    try:
        barrier.wait(30)
        # Capacity 6 that (practically) never refills: exactly 6 draws can ever pass.
        bucket = [Draw(key, capacity=6.0, rate=1e-9, amount=1.0)]
        return [(await state.draw(bucket, time.time())).allowed for _ in range(times)]
    finally:
        await state.close()
        await state.records.close()


def count(url: str, key: str, times: int, barrier: Barrier, out: Queue[list[int]]) -> None:
    out.put(asyncio.run(_count(url, key, times, barrier)))


def draw(url: str, key: str, times: int, barrier: Barrier, out: Queue[list[bool]]) -> None:
    out.put(asyncio.run(_draw(url, key, times, barrier)))
