"""Reruns answer alike on a fresh server and a long-lived one: a ``previous_response_id``
chain, or an Agents-SDK style rerun that sends the output items (with their ids) back, gets
the same text and tool arguments whatever the store already holds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.spine import seeding
from tests.support.live import FROZEN, Live, serve_in_thread

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
BASE: dict[str, Any] = {"model": "gpt-4o-mini", "tools": [WEATHER], "max_output_tokens": 16}


@pytest.fixture
def fresh() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as server:
        yield server


def _client(live: Live) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.base_url, api_key="sk-test", max_retries=0)


def _said(response: Any) -> list[Any]:
    """What a response answered: its texts and its calls' names, arguments and call ids."""
    said: list[Any] = []
    for item in response.output:
        if item.type == "function_call":
            said.append((item.name, item.arguments, item.call_id))
        elif item.type == "message":
            said.append("".join(part.text for part in item.content if part.type == "output_text"))
    return said


def _chain(client: openai.OpenAI) -> list[list[Any]]:
    """Three turns: a forced call, its result, a follow-up; each continues the previous one."""
    first = client.responses.create(**BASE, input="What is the weather in Paris?", tool_choice="required")
    call = next(item for item in first.output if item.type == "function_call")
    result = {"type": "function_call_output", "call_id": call.call_id, "output": '{"sky": "sunny"}'}
    second = client.responses.create(**BASE, previous_response_id=first.id, input=[result])  # type: ignore[list-item]
    third = client.responses.create(**BASE, previous_response_id=second.id, input="And tomorrow?")
    return [_said(first), _said(second), _said(third)]


def _rerun(client: openai.OpenAI) -> list[list[Any]]:
    """The Agents SDK's way without a stored chain: every turn sends all items back, ids included."""
    asked: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.responses.create(**BASE, input=asked, tool_choice="required", store=True)
    asked += [item.model_dump(exclude_none=True) for item in first.output]
    call = next(item for item in first.output if item.type == "function_call")
    asked.append({"type": "function_call_output", "call_id": call.call_id, "output": '{"sky": "sunny"}'})
    second = client.responses.create(**BASE, input=asked)
    asked += [item.model_dump(exclude_none=True) for item in second.output]
    asked.append({"role": "user", "content": "And tomorrow?"})
    third = client.responses.create(**BASE, input=asked, tool_choice="none")  # sampled: the seed shows
    return [_said(first), _said(second), _said(third)]


def test_a_chain_answers_alike_after_a_reset_and_on_a_fresh_server(live: Live, fresh: Live) -> None:
    long_lived = _client(live)
    once = _chain(long_lived)
    again = _chain(long_lived)  # the first chain's responses are still stored
    httpx.post(live.url + "/__mockserver/reset", timeout=10).raise_for_status()
    after_reset = _chain(long_lived)
    anew = _chain(_client(fresh))
    assert once == again == after_reset == anew
    assert once[0] and isinstance(once[0][0], tuple)  # the first turn called the tool
    assert once[2] and isinstance(once[2][-1], str) and once[2][-1]


def test_an_agents_sdk_style_rerun_answers_alike(live: Live, fresh: Live) -> None:
    long_lived = _client(live)
    assert _rerun(long_lived) == _rerun(long_lived) == _rerun(_client(fresh))


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({"input": [{"id": "fc_1", "type": "function_call"}]}, {"input": [{"id": "fc_2", "type": "function_call"}]}),
        ({"input": "x", "previous_response_id": "resp_a"}, {"input": "x", "previous_response_id": "resp_b"}),
    ],
    ids=["item-ids", "previous-response-id"],
)
def test_echoed_ids_stay_out_of_the_canonical_form(one: dict[str, Any], other: dict[str, Any]) -> None:
    assert seeding.canonical(one) == seeding.canonical(other)
    assert seeding.canonical({"input": [{"id": "fc_1"}]}) != seeding.canonical({"input": [{"call_id": "c"}]})


def test_continuations_of_different_conversations_draw_differently() -> None:
    assert seeding.continued_seed(5, (("user", "a"),)) != seeding.continued_seed(5, (("user", "b"),))


def test_a_continuation_differs_from_its_history(client: openai.OpenAI) -> None:
    # previous_response_id is not hashed, but what it stands for is: different histories, different seeds.
    one = client.responses.create(model="m", input="Name a colour.", max_output_tokens=16)
    two = client.responses.create(model="m", input="Name a fruit.", max_output_tokens=16)
    raw = client.responses.with_raw_response
    follow = [raw.create(model="m", previous_response_id=r.id, input="Why?", max_output_tokens=16) for r in (one, two)]
    seeds = {raw.headers["x-mockserver-seed"] for raw in follow}
    assert len(seeds) == 2


def _ids(client: openai.OpenAI) -> list[str]:
    """The ids a chain's responses and their items get."""
    first = client.responses.create(**BASE, input="What is the weather in Paris?", tool_choice="required")
    second = client.responses.create(**BASE, previous_response_id=first.id, input="And tomorrow?")
    return [first.id, *(item.id or "" for item in first.output), second.id, *(i.id or "" for i in second.output)]


def test_after_a_reset_a_rerun_gets_the_ids_of_a_fresh_server(live: Live, fresh: Live) -> None:
    """A response id is the first of the request's deterministic ids free in the store, so a
    second run on a long-lived server gets others; a reset (no session) empties the store."""
    long_lived = _client(live)
    httpx.post(live.url + "/__mockserver/reset", timeout=10).raise_for_status()
    once = _ids(long_lived)
    again = _ids(long_lived)
    assert again[0] != once[0]  # the first run's responses are still stored: distinct ids
    httpx.post(live.url + "/__mockserver/reset", timeout=10).raise_for_status()
    assert _ids(long_lived) == once == _ids(_client(fresh))
    gone = httpx.get(f"{live.base_url}/responses/{again[0]}")
    assert gone.status_code == 404  # reset forgot the stored responses
