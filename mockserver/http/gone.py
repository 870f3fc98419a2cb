"""Work that ends when its client leaves.

A streamed answer notices a hang-up when it writes (see :mod:`mockserver.http.sse`); a
non-streamed one writes nothing until the end, so without a listener a client that gives up
on ``n=128, max_tokens=2000`` leaves a core busy for minutes. :func:`unless_gone` runs such
work and cancels it as soon as the client's connection closes — so a model stops within a
decoding step, as it does for a stream.

Listening costs a task, so it starts only once the work first waits: an answer that is ready at
once (scripted, replayed) runs straight through and pays nothing for it. The same trick
(:class:`Resumed`: an awaitable driven by hand up to its first wait, then handed to the task)
serves the SSE writer, which listens only while its producer waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

from starlette.types import Receive

__all__ = ["ClientGone", "Resumed", "disconnected", "unless_gone"]

_T = TypeVar("_T")


class ClientGone(Exception):
    """The client closed its connection before its answer was ready; the work was cancelled."""


async def disconnected(receive: Receive) -> None:
    """Return once the client has gone (a body still being replayed is skipped over)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class Resumed:
    """The rest of an awaitable already run to the point where it waits: ``waiting`` is what it
    yielded to the task (its future). Awaiting this hands that to the task and goes on driving
    the awaitable, exceptions (a cancellation) passed in as they come."""

    __slots__ = ("awaitable", "cancel", "waiting")

    def __init__(self, awaitable: Any, waiting: Any) -> None:
        self.awaitable = awaitable
        self.waiting = waiting
        self.cancel = False  # cancel the awaitable instead of waiting for it

    def __await__(self) -> Generator[Any, Any, Any]:
        awaitable, waiting = self.awaitable, self.waiting
        if self.cancel:
            try:
                waiting = awaitable.throw(asyncio.CancelledError())
            except StopIteration as done:
                return done.value
        while True:
            try:
                sent = yield waiting
            except GeneratorExit:
                awaitable.close()
                raise
            except BaseException as exc:
                try:
                    waiting = awaitable.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    waiting = awaitable.send(sent)
                except StopIteration as done:
                    return done.value


async def unless_gone(receive: Receive, work: Coroutine[Any, Any, _T]) -> _T:
    """``work``'s result; :class:`ClientGone` if the client hangs up first (``work`` is then
    cancelled where it waits, so its ``finally`` blocks run before this returns)."""
    try:
        waiting = work.send(None)  # run it up to its first wait
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    task = asyncio.current_task()
    listening = True  # false once the work is over: a late hang-up must not cancel the caller

    def hang_up(gone: asyncio.Future[None]) -> None:
        if listening and task is not None and not gone.cancelled():
            task.cancel()

    watcher = asyncio.ensure_future(disconnected(receive))
    watcher.add_done_callback(hang_up)
    try:
        result: _T = await Resumed(work, waiting)
        return result
    except asyncio.CancelledError:
        if watcher.done() and not watcher.cancelled() and task is not None:
            task.uncancel()
            raise ClientGone() from None
        raise
    finally:
        listening = False
        if watcher.done() and not watcher.cancelled():
            watcher.exception()  # retrieved: a receive that failed is a hang-up too, not a log line
        watcher.cancel()
