"""``best_of``: generate more candidates than were asked for, return the most likely ones.

The request runs as if it asked ``n = best_of``, so candidate ``i`` is exactly the choice a
request with ``n = best_of`` and the same seed would get. Per prompt, the ``n`` candidates
with the highest cumulative logprob (the sum over the returned completion tokens; the
prompt of ``echo`` not included) are returned, best first, renumbered ``p * n + rank``; ties
keep the lower candidate index. Usage counts every candidate generated, as providers bill.

It needs every choice finished before it can rank them, so it cannot stream (the codecs
answer ``best_of`` with ``stream`` by a 400), and it works over any backend whose tokens
carry logprobs: the candidates are generated with logprobs on, and stripped again when the
caller did not ask for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from mockserver.spine.backend import aclose
from mockserver.spine.events import CHOICE_EVENTS, ChoiceEvent, Event, TextDelta, Usage
from mockserver.spine.request import GenerationRequest

__all__ = ["best_of"]


async def best_of(
    generate: Callable[[GenerationRequest], AsyncIterator[Event]], request: GenerationRequest
) -> AsyncIterator[Event]:
    k, n = request.best_of or request.n, request.n
    wanted = request.sampling.logprobs
    inner = replace(
        request, n=k, best_of=None, sampling=replace(request.sampling, logprobs=0 if wanted is None else wanted)
    )
    per_choice: dict[int, list[ChoiceEvent]] = {}
    scores: dict[int, float] = {}
    usage: Usage | None = None
    stream = generate(inner)
    try:
        async for event in stream:
            if isinstance(event, Usage):
                usage = event
                continue
            if not isinstance(event, CHOICE_EVENTS):
                continue  # the model's own events are all per choice
            per_choice.setdefault(event.index, []).append(event)
            if isinstance(event, TextDelta) and not event.echo:
                scores[event.index] = scores.get(event.index, 0.0) + sum(t.logprob or 0.0 for t in event.tokens)
    finally:
        await aclose(stream)
    for p in range(len(request.prompts)):
        candidates = range(p * k, (p + 1) * k)
        ranked = sorted(candidates, key=lambda i: (-scores.get(i, 0.0), i))[:n]
        for rank, i in enumerate(ranked):
            for event in per_choice.get(i, []):
                if isinstance(event, TextDelta) and wanted is None:
                    event = replace(event, tokens=())
                yield replace(event, index=p * n + rank)
    if usage is not None:
        yield usage
