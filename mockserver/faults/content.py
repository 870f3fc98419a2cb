"""Content faults on the event stream: answers that finish badly or refuse.

``content.length`` and ``content.filter`` finish every choice with ``length`` or
``content_filter``; ``content.refusal`` replaces every choice's generated text with one
refusal. They act on the events a backend generates (the model's or a scripted answer's);
a recorded answer carries the provider's own bytes and is left as it was. The faults that
break JSON (``content.bad_arguments``, ``content.off_schema``) act earlier, on the decided
answer itself (:mod:`mockserver.answers.director`), so the model scores the broken text. The
misbehaviours (an unknown tool, duplicate call ids, an empty answer, a call cut by the length
limit, reasoning only) are :mod:`mockserver.faults.misbehaviour`'s, applied here first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from mockserver.faults import misbehaviour
from mockserver.faults.catalogue import Fault
from mockserver.spine.backend import aclose
from mockserver.spine.events import Event, Finished, FinishReason, Refusal, TextDelta
from mockserver.spine.request import GenerationRequest

__all__ = ["ON_EVENTS", "REFUSAL", "apply"]

REFUSAL = "I'm sorry, but I can't help with that."
_FINISHING: dict[str, FinishReason] = {"content.length": "length", "content.filter": "content_filter"}
ON_EVENTS = frozenset({*_FINISHING, "content.refusal", *misbehaviour.NAMES})  # the content faults applied here


def apply(
    events: AsyncIterator[Event], faults: Sequence[Fault], request: GenerationRequest | None = None
) -> AsyncIterator[Event]:
    """``events`` with the request's misbehaving, finishing and refusing faults applied
    (``request``: the decoded request, None for a recording's, seeds the misbehaviours)."""
    if not faults:
        return events
    names = [f.name for f in faults if f.name in misbehaviour.NAMES]
    if names:
        events = misbehaviour.apply(events, names, request)
    finish = next((_FINISHING[f.name] for f in faults if f.name in _FINISHING), None)
    if finish is not None:
        events = _finishing(events, finish)
    if any(f.name == "content.refusal" for f in faults):
        events = _refusing(events)
    return events


async def _finishing(events: AsyncIterator[Event], reason: FinishReason) -> AsyncIterator[Event]:
    """Every choice finishes with ``reason``."""
    try:
        async for event in events:
            yield replace(event, reason=reason, matched=None) if isinstance(event, Finished) else event
    finally:
        await aclose(events)


async def _refusing(events: AsyncIterator[Event]) -> AsyncIterator[Event]:
    """Every choice refuses: its generated text is replaced by one refusal; the prompt echo,
    usage and finish stay the model's."""
    try:
        async for event in events:
            if isinstance(event, TextDelta) and not event.echo:
                continue
            if isinstance(event, Finished):
                yield Refusal(event.index, REFUSAL)
                event = replace(event, reason="stop", matched=None)
            yield event
    finally:
        await aclose(events)
