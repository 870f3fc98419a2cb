"""The Responses API's ``mcp`` tool against the server's own /mcp, with the official ``openai``
SDK: list, call, message (streamed with the mcp events), approval and its answer, failed calls
in the spec's typed error, and no call to a host the server does not allow. Bodies and events are
held to OpenAI's OpenAPI description (tests/support/spec.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import jsonschema
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support import spec
from tests.support.live import FROZEN, Live, serve_in_thread
from tests.support.tools import MCP_SCHEMA as SCHEMA
from tests.support.tools import MCP_TOOLS as TOOLS


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    # Scripted answers only: the model's words are not what these tests are about (and it never loads).
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, backend="script"))) as server:
        httpx2.post(f"{server.url}/__mockserver/answers", json={"text": "Done."}).raise_for_status()
        yield server


def setup(live: Live, session: str, tools: list[dict[str, Any]] = TOOLS) -> openai.OpenAI:
    url = f"{live.url}/__mockserver/mcp"
    httpx2.post(url, params={"session": session}, json={"tools": tools}).raise_for_status()
    headers = {"x-mockserver-session": session}
    return openai.OpenAI(base_url=live.base_url, api_key="sk-test", default_headers=headers, max_retries=0)


def mcp(live: Live, **extra: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "weather", "server_url": f"{live.url}/mcp", **extra}


def raw(client: openai.OpenAI, **body: Any) -> dict[str, Any]:
    answer = client.post("/responses", body={"model": "gpt-4o-mini", "max_output_tokens": 16, **body}, cast_to=object)
    assert isinstance(answer, dict)
    return answer


def test_it_lists_calls_and_answers_streamed_alike(live: Live) -> None:
    client = setup(live, "flow")
    body = {"input": "What does get_weather say for Rome?", "tools": [mcp(live, require_approval="never")]}
    response = raw(client, **body)
    spec.validate("Response", response)
    listed, call, message = response["output"]
    assert (listed["type"], call["type"], message["type"]) == ("mcp_list_tools", "mcp_call", "message")
    assert [t["name"] for t in listed["tools"]] == ["get_weather", "get_time"]
    assert listed["tools"][0]["input_schema"] == SCHEMA
    assert call["name"] == "get_weather" and call["output"] == "21 degrees" and call["error"] is None
    jsonschema.validate(json.loads(call["arguments"]), SCHEMA)  # drawn from the tool's inputSchema
    assert raw(client, **body)["output"][:2] == [listed, call]  # seeded: the same call again
    create: Any = client.responses.create  # the SDK's overloads want typed tool params
    streamed = create(model="gpt-4o-mini", max_output_tokens=16, stream=True, **body)
    events = [e.model_dump(mode="json", exclude_unset=True) for e in streamed]
    for event in events:
        spec.validate("ResponseStreamEvent", event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[2:12] == [
        "response.output_item.added",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.output_item.done",
        "response.output_item.added",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
        "response.output_item.done",
    ]
    assert events[12]["output_index"] == 2  # the message comes third
    final = events[-1]["response"]
    assert [o["type"] for o in final["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    assert final["output"][1] == call


def test_approval_is_asked_by_default_then_approved_or_denied(live: Live) -> None:
    client = setup(live, "approve")
    tool = mcp(live, allowed_tools=["get_weather"])
    asking = raw(client, input="weather?", tools=[tool])
    spec.validate("Response", asking)
    listed, request = asking["output"]
    assert [t["name"] for t in listed["tools"]] == ["get_weather"] and request["type"] == "mcp_approval_request"
    answer = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
    approved = raw(client, input=[answer], tools=[tool], previous_response_id=asking["id"])
    spec.validate("Response", approved)
    call, message = approved["output"]
    assert (call["approval_request_id"], call["output"], message["type"]) == (request["id"], "21 degrees", "message")
    before = len(journal(live, "approve"))
    denied = raw(client, input=[{**answer, "approve": False}], tools=[tool], previous_response_id=asking["id"])
    assert [o["type"] for o in denied["output"]] == ["message"]
    assert not [e for e in journal(live, "approve")[before:] if e["kind"] == "mcp"]  # no call when denied
    with pytest.raises(openai.BadRequestError) as unknown:
        raw(
            client,
            input=[{**answer, "approval_request_id": "mcpr_nope"}],
            tools=[tool],
            previous_response_id=asking["id"],
        )
    assert unknown.value.body["param"] == "input[0].approval_request_id"  # type: ignore[index]


def journal(live: Live, session: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = httpx2.get(f"{live.url}/__mockserver/journal", params={"session": session}).json()[
        "entries"
    ]
    return entries


@pytest.mark.parametrize(
    ("setup_fault", "error"),
    [
        ({"tool_fault": "mcp.error"}, {"type": "mcp_tool_execution_error"}),
        ({"rule": "mcp.protocol_error=32001"}, {"type": "mcp_protocol_error", "code": -32001}),
    ],
    ids=["tool-error", "protocol-error"],
)
def test_a_failing_call_fills_the_typed_error(live: Live, setup_fault: dict[str, str], error: dict[str, Any]) -> None:
    session = f"fail-{next(iter(setup_fault))}"
    tool = {**TOOLS[0], **({"fault": setup_fault["tool_fault"]} if "tool_fault" in setup_fault else {})}
    client = setup(live, session, [tool])
    if "rule" in setup_fault:
        rule = {"faults": setup_fault["rule"], "path": "/mcp/tools/call*"}
        httpx2.post(f"{live.url}/__mockserver/rules", params={"session": session}, json=rule).raise_for_status()
    response = raw(client, input="weather", tools=[mcp(live, require_approval="never")])
    spec.validate("Response", response)
    call = response["output"][1]
    assert call["status"] == "failed" and call["output"] is None
    assert {k: call["error"][k] for k in error} == error


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"server_url": "http://169.254.169.254/mcp"}, "tools[0].server_url"),
        ({"server_url": "http://127.0.0.1.nip.io/mcp"}, "tools[0].server_url"),
        ({"server_url": None, "connector_id": "connector_gmail"}, "tools[0].connector_id"),
        ({"server_label": ""}, "tools[0].server_label"),
        ({"require_approval": "sometimes"}, "tools[0].require_approval"),
    ],
    ids=["metadata-ip", "rebinding-name", "connector", "no-label", "bad-approval"],
)
def test_no_mcp_request_reaches_a_host_not_allowed(live: Live, tool: dict[str, Any], param: str) -> None:
    client = setup(live, "forgery")
    before = len(journal(live, "forgery"))
    with pytest.raises(openai.BadRequestError) as refused:
        raw(client, input="x", tools=[{**mcp(live), **tool}])
    assert refused.value.body["param"] == param  # type: ignore[index]
    assert [e["kind"] for e in journal(live, "forgery")[before:]] == ["model"]  # refused before any MCP call
