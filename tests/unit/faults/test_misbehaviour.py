"""The misbehaviour faults as event transformers: what each makes of a text answer and of a
streamed call (arguments in fragments), with several choices, and the seeded tool name."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from mockserver.faults import content
from mockserver.faults.catalogue import parse
from mockserver.faults.misbehaviour import THOUGHT, UNOFFERED, unoffered_name
from mockserver.spine.events import Event, Finished, Reasoning, Refusal, Started, TextDelta, ToolCallDelta, Usage
from mockserver.spine.request import GenerationRequest, Prompt, Sampling, Tool
from mockserver.spine.result import Result


def _request(seed: int = 1, tools: Sequence[str] = ()) -> GenerationRequest:
    return GenerationRequest(
        "chat", "m", (Prompt(),), 1, Sampling(), seed, 100, b"{}", tools=tuple(Tool(n) for n in tools)
    )


TEXT: list[Event] = [Started(0), TextDelta(0, "Hi "), TextDelta(0, "there."), Finished(0, "stop"), Usage(3, 2)]
# Two calls, the second's arguments in three fragments, beside a choice that answers in text.
CALLS: list[Event] = [
    Started(0),
    Started(1),
    ToolCallDelta(0, 0, "call_a", "f", '{"x":1}'),
    TextDelta(1, "No call."),
    ToolCallDelta(0, 1, "call_b", "g", '{"y"'),
    ToolCallDelta(0, 1, None, None, ':"abc'),
    ToolCallDelta(0, 1, None, None, 'd"}'),
    Finished(0, "tool_calls"),
    Finished(1, "stop"),
    Usage(5, 9),
]


def _run(events: list[Event], spec: str, request: GenerationRequest | None = None) -> tuple[list[Event], Result]:
    async def source() -> AsyncIterator[Event]:
        for event in events:
            yield event

    async def collect() -> list[Event]:
        return [e async for e in content.apply(source(), parse(spec), request or _request())]

    out = asyncio.run(collect())
    result = Result()
    for event in out:
        result.apply(event)
    return out, result


def _calls(result: Result, index: int = 0) -> list[tuple[str, str, str]]:
    return [(c.id, c.name, c.arguments) for c in result.choice(index).tool_calls]


def test_without_faults_the_events_are_the_same_object() -> None:
    async def source() -> AsyncIterator[Event]:
        yield Finished(0, "stop")

    events = source()
    assert content.apply(events, ()) is events


def test_unknown_tool_renames_the_first_call_and_turns_text_into_a_call() -> None:
    _, result = _run(CALLS, "content.unknown_tool", _request(tools=["f", "g"]))
    name = _calls(result)[0][1]
    assert name in UNOFFERED and _calls(result)[1:] == [("call_b", "g", '{"y":"abcd"}')]
    texted = _calls(result, 1)
    assert texted[0][1:] == (name, "{}") and texted[0][0].startswith("call_") and result.choice(1).text == ""
    assert result.choice(1).finish_reason == "tool_calls"


def test_the_unoffered_name_is_seeded_and_never_offered() -> None:
    names = {unoffered_name(_request(seed)) for seed in range(40)}
    assert len(names) > 1 and names <= set(UNOFFERED)
    assert unoffered_name(_request(7)) == unoffered_name(_request(7))
    assert unoffered_name(_request(7, tools=UNOFFERED)) not in UNOFFERED


def test_duplicate_call_ids_gives_every_call_the_first_id_and_repeats_a_lone_call() -> None:
    _, result = _run(CALLS, "content.duplicate_call_ids")
    assert [c[0] for c in _calls(result)] == ["call_a", "call_a"]
    _, lone = _run([ToolCallDelta(0, 0, "call_z", "f", "{}"), Finished(0, "tool_calls")], "content.duplicate_call_ids")
    assert _calls(lone) == [("call_z", "f", "{}"), ("call_z", "f", "{}")]
    assert _run(TEXT, "content.duplicate_call_ids")[0] == TEXT  # nothing to duplicate


def test_empty_says_nothing_but_keeps_the_usage() -> None:
    events = [Reasoning(0, "hmm"), Refusal(0, "no"), *CALLS]
    out, result = _run(events, "content.empty")
    assert all(not (c.text or c.tool_calls or c.reasoning or c.refusal) for c in result.ordered())
    assert [c.finish_reason for c in result.ordered()] == ["stop", "stop"] and out[-1] == Usage(5, 9)


def test_length_in_call_cuts_the_last_call_at_half_across_its_fragments() -> None:
    _, result = _run(CALLS, "content.length_in_call")
    whole = '{"y":"abcd"}'
    assert _calls(result) == [("call_a", "f", '{"x":1}'), ("call_b", "g", whole[: len(whole) // 2])]
    assert result.choice(0).finish_reason == "length"
    assert result.choice(1).text == "No call." and result.choice(1).finish_reason == "length"


@pytest.mark.parametrize("arguments", ["", "{", "{}"])
def test_length_in_call_never_leaves_short_arguments_whole(arguments: str) -> None:
    _, result = _run([ToolCallDelta(0, 0, "c", "f", arguments), Finished(0, "tool_calls")], "content.length_in_call")
    assert _calls(result) == [("c", "f", arguments[: len(arguments) // 2])]


def test_reasoning_only_thinks_what_it_would_have_said() -> None:
    out, result = _run(CALLS, "content.reasoning_only")
    assert result.choice(1).reasoning == "No call." and result.choice(0).reasoning == THOUGHT
    assert all(not (c.text or c.tool_calls) and c.finish_reason == "length" for c in result.ordered())
    assert out[-1] == Usage(5, 9, reasoning_tokens=9)


def test_echoed_prompt_text_is_never_touched() -> None:
    echo = TextDelta(0, "prompt", echo=True)
    for name in ("content.unknown_tool", "content.empty", "content.reasoning_only"):
        out, _ = _run([echo, *TEXT], name)
        assert out[0] == echo
