"""The reference backend: answers every generation with the tiny model.

Model compute never runs on the event loop. Each request becomes a
:class:`~mockserver.backends.reference.decoding.Decoding` whose
prefill and then its decoding steps (one token for every live choice) run as tasks on a small
thread pool; the event loop only awaits them. A streamed request hands over one step per task,
so its tokens leave as they are made and a client that went away stops generation after the
step in flight (a queued step is cancelled; the async generator is never resumed). A
non-streamed request has no one to show tokens to, and every hand-off between the event loop
and a pool thread costs two thread wake-ups (~0.5 ms on a small VM), so it runs as few tasks
as it can: it keeps stepping while nobody else waits for the pool (up to
:data:`~mockserver.backends.reference.decoding.SLICE_ALONE`), and yields after ``SLICE_SHARED`` when somebody does.

That is the *single-row* path (``max_batch=0``). By default (``max_batch`` > 0) decoding is
batched instead: every request joins one :class:`~mockserver.backends.reference.scheduler.Scheduler`,
whose thread advances all live choices of all requests in one batched model step per turn
(continuous batching). The kernel computes each row of a step as it computes it alone, so a
row's numbers are bit-identical to the single-row path's whatever else shares the step: an
answer never depends on what else is running (``docs/reference-model.md``, "Batching"). The
pool still loads the model, prefills prompts and computes embeddings. The kernel releases the
interpreter lock while it computes, so the pool's work and the batch's run beside the event loop.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from mockserver.answers import director
from mockserver.backends.reference.best_of import best_of
from mockserver.backends.reference.decoding import Decoding
from mockserver.backends.reference.runtime import ASSET_FILES, Runtime
from mockserver.backends.reference.scheduler import Scheduler, Ticket, receive
from mockserver.spine.backend import ModelLink, aclose
from mockserver.spine.events import Event
from mockserver.spine.request import GenerationRequest

if TYPE_CHECKING:
    from mockserver.backends import Parts
    from mockserver.backends.reference.pooling import Pooler
    from mockserver.media.vectors import Space, TokenCheck
    from mockserver.spine.backend import Backend

__all__ = ["MAX_BATCH", "ReferenceBackend", "from_parts"]

MAX_BATCH = 64  # rows (choices) in one batched step; more wait their turn, first come first served

_T = TypeVar("_T")


class ReferenceBackend:
    """Backend over :class:`Runtime`; ``threads`` is the size of the model pool, ``max_batch``
    the rows of the batched decoding step (0: every request decodes alone, on the pool)."""

    def __init__(
        self,
        threads: int = 2,
        assets: Path | None = None,
        max_positions: int = 8192,
        max_batch: int = MAX_BATCH,
        kernel: str = "auto",
    ) -> None:
        from mockserver.gpt.tokenizer import ASSETS

        directory = assets or ASSETS
        missing = [n for n in ASSET_FILES if not (directory / n).is_file()]
        if missing:  # fail at start-up, not with a 500 on every request
            raise FileNotFoundError(
                f"reference model files missing in {directory}: {', '.join(missing)} "
                "(they ship with the package; rebuild them with `python -m training.train`)"
            )
        # Known before the model loads, so requests can be validated against it (logit_bias).
        self.vocab_size: int = json.loads((directory / "config.json").read_text())["vocab_size"]
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="mockserver-model")
        self._assets = assets
        self._max_positions = max_positions
        self._kernel = kernel
        self._lock = threading.Lock()
        self._queued = 0  # tasks submitted to the pool and not yet started
        self._loading: Future[Runtime] | None = None
        self.steps = 0  # decoding steps taken, all requests together (observable by tests)
        self._pooler: Pooler | None = None  # embeddings, made on first use
        self.max_batch = max_batch
        self._scheduler: Scheduler | None = None  # made with the runtime, when batching

    def warm_up(self) -> Future[Runtime]:
        """Start loading the model in the pool (idempotent); requests wait for it."""
        with self._lock:
            if self._loading is None:
                self._loading = self._pool.submit(Runtime, self._assets, self._max_positions, self._kernel)
            return self._loading

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            if self._scheduler is not None:
                self._scheduler.close()

    def _count(self, steps: int) -> None:
        self.steps += steps

    def _batch(self, runtime: Runtime) -> Scheduler:
        with self._lock:
            if self._scheduler is None:
                self._scheduler = Scheduler(runtime, self.max_batch, on_steps=self._count)
            return self._scheduler

    def _submit(self, fn: Callable[[], _T]) -> Future[_T]:
        with self._lock:
            self._queued += 1

        def task() -> _T:
            with self._lock:
                self._queued -= 1
            return fn()

        def uncount(future: Future[_T]) -> None:
            if future.cancelled():  # it never started, so task() never uncounted it
                with self._lock:
                    self._queued -= 1

        future = self._pool.submit(task)
        # Cancellation can come from anywhere: the finally below, or asyncio cancelling an
        # awaited wrap_future (a client gone while its request waited for the pool).
        future.add_done_callback(uncount)
        return future

    def _contended(self) -> bool:
        """Is other work waiting for a pool thread? (Read racily: a hint for slicing.)"""
        return self._queued > 0

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        """The model's answer: a tool call or JSON where the director decides one (else what it
        samples), the ``best_of`` most likely of more candidates when asked."""
        decided = director.decide(request)
        if decided.best_of is not None and decided.best_of > decided.n:
            stream = best_of(self._generate, decided)
        else:
            stream = self._generate(decided)
        try:
            async for event in stream:
                yield event
        finally:
            await aclose(stream)

    async def _generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        runtime = await asyncio.wrap_future(self.warm_up())
        if self.max_batch > 0:
            batched = self._batched(runtime, request)
            try:
                async for event in batched:
                    yield event
            finally:
                await aclose(batched)  # closed now, not when collected: its rows free at once
            return

        def start() -> tuple[Decoding, list[Event]]:
            job = Decoding(runtime, request)
            if request.stream or job.done:
                return job, job.opening
            return job, job.opening + job.advance_slice(self._contended)

        job, opening = await asyncio.wrap_future(self._submit(start))
        self.steps += job.steps
        step = job.advance if request.stream else partial(job.advance_slice, self._contended)
        # Pipelined: the next task is submitted before this one's events are handed on, so
        # the model computes token i+1 while the event loop encodes and sends token i. One
        # task at most is in flight per request, so its steps still run strictly in order.
        pending = None if job.done else self._submit(step)
        try:
            for event in opening:
                yield event
            while pending is not None:
                before = job.steps
                events = await asyncio.wrap_future(pending)
                self.steps += job.steps - before
                pending = None if job.done else self._submit(step)
                for event in events:
                    yield event
        finally:
            if pending is not None:
                pending.cancel()  # the client left: a queued step never runs

    async def _batched(self, runtime: Runtime, request: GenerationRequest) -> AsyncIterator[Event]:
        """Prefilled on the pool, then decoded in the batch. A non-streamed request that finds
        the batch empty first runs alone in that pool task, as on the single-row path, while
        nobody else comes (one hand-off for a short answer, not one per turn); it joins the
        batch, where its choices carry on from the same keys, as soon as someone does."""
        scheduler = self._batch(runtime)

        def contended() -> bool:
            return scheduler.busy() or self._contended()

        def start() -> tuple[Decoding, list[Event]]:
            job = Decoding(runtime, request)  # single-row stepper while it runs alone (the batch sets its own)
            events = list(job.opening)
            if not (request.stream or job.done or contended()):
                events += job.advance_slice(contended)
            return job, events

        job, events = await asyncio.wrap_future(self._submit(start))
        self.steps += job.steps
        if job.done:
            for event in events:
                yield event
            return
        stream = receive(scheduler, Ticket(job, asyncio.get_running_loop(), events))
        try:
            async for event in stream:
                yield event
        finally:
            await aclose(stream)

    async def embed(
        self, inputs: Sequence[str | Sequence[int]], space: Space, check: TokenCheck, *, for_json: bool = False
    ) -> tuple[list[list[float]], int]:
        """Embeddings (:class:`~mockserver.media.vectors.Embedder`; the pooling is described in
        :mod:`mockserver.backends.reference.pooling`). Tokenised, checked and computed on the pool,
        each input alone, in tasks of bounded cost so that other requests get a thread between."""
        from mockserver.backends.reference.pooling import Pooler, shortest, slices

        runtime = await asyncio.wrap_future(self.warm_up())
        if self._pooler is None:
            self._pooler = Pooler(runtime.decoder)  # cheap: it computes what it needs in the pool
        pooler = self._pooler

        def compute(part: list[list[int]]) -> list[list[float]]:
            vectors = [pooler.vector(ids, space) for ids in part]
            return shortest(vectors) if for_json else [v.tolist() for v in vectors]

        def start() -> tuple[list[list[list[int]]], list[list[float]]]:
            ids = [runtime.tokenizer.encode(x) if isinstance(x, str) else list(x) for x in inputs]
            check(ids)
            parts = slices(ids)
            return parts, compute(parts[0])

        parts, rows = await asyncio.wrap_future(self._submit(start))
        for part in parts[1:]:
            rows += await asyncio.wrap_future(self._submit(partial(compute, part)))
        return rows, sum(len(ids) for part in parts for ids in part)


def from_parts(parts: Parts) -> Backend:
    """The registry's factory (see :mod:`mockserver.backends`): the app's one model, as a link."""
    return ModelLink(parts.reference())
