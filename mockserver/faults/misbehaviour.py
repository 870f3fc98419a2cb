"""Misbehaviour faults on the event stream: the model's bad days an agent loop must survive.

Each is an async-iterator transformer over the engine's events, so every wire (chat, Responses,
Anthropic Messages, Gemini) renders the misbehaviour in its own shape, from the same events:

* ``content.unknown_tool``: the answer calls a tool the request did not offer. Its first call
  is renamed; a choice that answered without a call answers with one (arguments ``{}``) in
  place of its text. The name is drawn, seeded by the request, from :data:`UNOFFERED` (past the
  names offered), and a new call's id from the request's seed, so the same request misbehaves
  the same way on every run.
* ``content.duplicate_call_ids``: every call of a choice carries the first call's id; a choice
  of one call repeats it (the same call twice, one id). A text answer is left as it is.
* ``content.empty``: nothing is said — no text, call, refusal or thought — and the choice
  finishes ``stop`` (usage stays the model's: it spent tokens and said nothing).
* ``content.length_in_call``: the length limit falls inside the last tool call: its arguments
  are cut at half (never valid JSON) and the choice finishes ``length``. A choice without
  calls just finishes ``length``.
* ``content.reasoning_only``: the model thinks and never answers, as a reasoning model that
  spends its whole ``max_output_tokens`` on thought: its text becomes its reasoning, its calls
  and refusals are dropped, and it finishes ``length`` (every completion token a reasoning one).

The calls of a choice under ``content.length_in_call`` are held back until it finishes (the
last one is only known then); everything else flows event by event.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace

from mockserver.spine.backend import aclose
from mockserver.spine.events import Event, Finished, Reasoning, Refusal, TextDelta, ToolCallDelta, Usage
from mockserver.spine.request import GenerationRequest
from mockserver.spine.seeding import digest

__all__ = ["NAMES", "THOUGHT", "UNOFFERED", "apply", "unoffered_name"]

# Names a model makes up: plausible tools a request rarely offers (past these, a numbered one).
UNOFFERED = ("search_web", "get_current_time", "run_python", "send_email", "read_file", "lookup_user")
# What a choice that thought nothing thinks under ``content.reasoning_only``.
THOUGHT = "Let me think about which step comes first before I answer."

_Transform = Callable[[AsyncIterator[Event], GenerationRequest | None], AsyncIterator[Event]]


def unoffered_name(request: GenerationRequest | None) -> str:
    """A tool name the request does not offer, drawn (seeded by the request) from :data:`UNOFFERED`."""
    offered = {tool.name for tool in request.tools} if request is not None else set()
    free = [name for name in UNOFFERED if name not in offered]
    if not free:
        free = [f"{UNOFFERED[0]}_{n}" for n in range(2, 2 + len(offered) + 1) if f"{UNOFFERED[0]}_{n}" not in offered]
    seed = request.seed if request is not None else 0
    return random.Random(int.from_bytes(digest(b"unoffered", seed)[:8], "big")).choice(free)


def _call_id(request: GenerationRequest | None, choice: int) -> str:
    seed, canonical = (request.seed, request.canonical) if request is not None else (0, b"")
    return "call_" + digest(b"unknown_tool", seed, canonical, choice).hex()[:24]


async def _unknown_tool(events: AsyncIterator[Event], request: GenerationRequest | None) -> AsyncIterator[Event]:
    name = unoffered_name(request)
    called: set[int] = set()
    try:
        async for event in events:
            if isinstance(event, Refusal) or (isinstance(event, TextDelta) and not event.echo):
                continue  # the answer is the call
            if isinstance(event, ToolCallDelta):
                called.add(event.index)
                if event.call_index == 0 and event.name is not None:
                    event = replace(event, name=name)
            elif isinstance(event, Finished):
                if event.index not in called:
                    yield ToolCallDelta(event.index, 0, _call_id(request, event.index), name, "{}")
                event = replace(event, reason="tool_calls", matched=None)
            yield event
    finally:
        await aclose(events)


async def _duplicate_call_ids(events: AsyncIterator[Event], request: GenerationRequest | None) -> AsyncIterator[Event]:
    first: dict[int, list[str]] = {}  # per choice: the first call's id, name and arguments so far
    count: dict[int, int] = {}
    try:
        async for event in events:
            if isinstance(event, ToolCallDelta):
                count[event.index] = max(count.get(event.index, 0), event.call_index + 1)
                if event.call_index == 0:
                    seen = first.setdefault(event.index, ["", "", ""])
                    seen[0] = event.id or seen[0]
                    seen[1] = event.name or seen[1]
                    seen[2] += event.arguments
                elif event.id is not None and event.index in first:
                    event = replace(event, id=first[event.index][0])
            elif isinstance(event, Finished) and count.get(event.index) == 1:
                call_id, name, arguments = first[event.index]
                yield ToolCallDelta(event.index, 1, call_id, name, arguments)
            yield event
    finally:
        await aclose(events)


async def _empty(events: AsyncIterator[Event], request: GenerationRequest | None) -> AsyncIterator[Event]:
    try:
        async for event in events:
            if isinstance(event, ToolCallDelta | Refusal | Reasoning):
                continue
            if isinstance(event, TextDelta) and not event.echo:
                continue
            if isinstance(event, Finished):
                event = replace(event, reason="stop", matched=None)
            yield event
    finally:
        await aclose(events)


async def _length_in_call(events: AsyncIterator[Event], request: GenerationRequest | None) -> AsyncIterator[Event]:
    held: dict[int, list[ToolCallDelta]] = {}  # per choice: its calls' deltas, until it finishes
    try:
        async for event in events:
            if isinstance(event, ToolCallDelta):
                held.setdefault(event.index, []).append(event)
                continue
            if isinstance(event, Finished):
                for delta in _cut(held.pop(event.index, [])):
                    yield delta
                event = replace(event, reason="length", matched=None)
            yield event
    finally:
        await aclose(events)


def _cut(deltas: list[ToolCallDelta]) -> list[ToolCallDelta]:
    """``deltas`` with the last call's arguments cut at half (at least one character short)."""
    if not deltas:
        return []
    last = max(d.call_index for d in deltas)
    whole = sum(len(d.arguments) for d in deltas if d.call_index == last)
    room = whole // 2
    out = []
    for delta in deltas:
        if delta.call_index == last:
            kept = delta.arguments[:room]
            room -= len(kept)
            if not kept and delta.id is None and delta.name is None:
                continue
            delta = replace(delta, arguments=kept)
        out.append(delta)
    return out


async def _reasoning_only(events: AsyncIterator[Event], request: GenerationRequest | None) -> AsyncIterator[Event]:
    thought: set[int] = set()
    try:
        async for event in events:
            if isinstance(event, ToolCallDelta | Refusal):
                continue
            if isinstance(event, TextDelta) and not event.echo:
                event = Reasoning(event.index, event.text)
            if isinstance(event, Reasoning):
                thought.add(event.index)
            elif isinstance(event, Finished):
                if event.index not in thought:
                    yield Reasoning(event.index, THOUGHT)
                event = replace(event, reason="length", matched=None)
            elif isinstance(event, Usage):
                event = replace(event, reasoning_tokens=event.completion_tokens)
            yield event
    finally:
        await aclose(events)


# In the order they apply when several are asked for (as the catalogue lists them).
NAMES: dict[str, _Transform] = {
    "content.unknown_tool": _unknown_tool,
    "content.duplicate_call_ids": _duplicate_call_ids,
    "content.empty": _empty,
    "content.length_in_call": _length_in_call,
    "content.reasoning_only": _reasoning_only,
}


def apply(
    events: AsyncIterator[Event], names: Sequence[str], request: GenerationRequest | None
) -> AsyncIterator[Event]:
    """``events`` misbehaving as ``names`` (of :data:`NAMES`) say, in :data:`NAMES`' order."""
    for name, transform in NAMES.items():
        if name in names:
            events = transform(events, request)
    return events
