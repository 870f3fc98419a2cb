"""MCP tools and the fleet's fault rules on /v1/realtime, with the official SDK over a real
socket: a session's mcp tool lists the server's own /mcp tools, a response calls one (and asks
for approval when the tool needs it), and a rule another process added reaches a socket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.resources.realtime.realtime import RealtimeConnection

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread
from tests.support.realtime import until
from tests.support.tools import MCP_TOOLS as TOOLS


@pytest.fixture(scope="module")
def scripted() -> Iterator[Live]:
    # Scripted answers: the model's words are not what these tests are about.
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, backend="script"))) as server:
        httpx.post(f"{server.url}/__mockserver/answers", json={"text": "Done."}).raise_for_status()
        yield server


def _connect(live: Live, session: str) -> Any:
    httpx.post(f"{live.url}/__mockserver/mcp", params={"session": session}, json={"tools": TOOLS}).raise_for_status()
    client = openai.OpenAI(base_url=live.base_url, api_key="sk-test", max_retries=0)
    return client.realtime.connect(model="gpt-realtime", extra_headers={"x-mockserver-session": session})


def _mcp_session(conn: RealtimeConnection, live: Live, **tool: Any) -> list[Any]:
    until(conn, "session.created")
    mcp = {"type": "mcp", "server_label": "weather", "server_url": f"{live.url}/mcp", **tool}
    conn.session.update(session={"type": "realtime", "output_modalities": ["text"], "tools": [mcp]})  # type: ignore[list-item]
    return until(conn, "mcp_list_tools.completed") + until(conn, "conversation.item.done")


def _ask(conn: RealtimeConnection, text: str) -> list[Any]:
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    conn.conversation.item.create(item=item)  # type: ignore[arg-type]
    until(conn, "conversation.item.done")
    conn.response.create()
    return until(conn, "response.done")


def test_a_sessions_mcp_tool_is_listed_then_called_in_a_response(scripted: Live) -> None:
    with _connect(scripted, "rt-mcp-flow") as conn:
        listed = _mcp_session(conn, scripted, require_approval="never", allowed_tools=["get_weather"])
        assert [e.type for e in listed] == [
            "session.updated",
            "conversation.item.added",
            "mcp_list_tools.in_progress",
            "mcp_list_tools.completed",
            "conversation.item.done",
        ]
        assert [t.name for t in listed[-1].item.tools] == ["get_weather"]  # allowed_tools kept
        events = _ask(conn, "What does get_weather say for Lisbon?")
        conn.response.create()  # no new words from the user: they were served by the call, the model answers
        second = until(conn, "response.done")
    kinds = [e.type for e in events]
    call_events = [k for k in kinds if "mcp_call" in k]
    assert call_events == [
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
    ]
    output = events[-1].response.output
    assert [o.type for o in output] == ["mcp_call", "message"]
    call = output[0]
    assert call.name == "get_weather" and call.output == "21 degrees" and call.error is None
    assert isinstance(json.loads(call.arguments)["city"], str)  # drawn from the tool's schema
    assert next(e.arguments for e in events if e.type == "response.mcp_call_arguments.done") == call.arguments
    assert [o.type for o in second[-1].response.output] == ["message"]


def test_a_tool_that_needs_approval_is_called_once_approved(scripted: Live) -> None:
    with _connect(scripted, "rt-mcp-approval") as conn:
        _mcp_session(conn, scripted)  # require_approval: "always", the spec's default
        asked = _ask(conn, "What time is it? Use get_time.")
        request = asked[-1].response.output[0]
        assert [o.type for o in asked[-1].response.output] == ["mcp_approval_request"] and request.name == "get_time"
        answer = {"type": "mcp_approval_response", "approval_request_id": "mcpr_nope", "approve": True}
        conn.conversation.item.create(item=answer, event_id="evt_bad")  # type: ignore[arg-type]
        assert until(conn, "error")[-1].error.param == "item.approval_request_id"
        conn.conversation.item.create(item={**answer, "approval_request_id": request.id})  # type: ignore[arg-type]
        until(conn, "conversation.item.done")
        conn.response.create()
        done = until(conn, "response.done")[-1].response
    assert [o.type for o in done.output] == ["mcp_call", "message"]
    assert done.output[0].approval_request_id == request.id and done.output[0].name == "get_time"


def test_a_server_the_host_does_not_allow_is_refused_naming_it(scripted: Live) -> None:
    with _connect(scripted, "rt-mcp-host") as conn:
        until(conn, "session.created")
        mcp = {"type": "mcp", "server_label": "far", "server_url": "https://example.com/mcp"}
        conn.session.update(session={"type": "realtime", "tools": [mcp]}, event_id="evt_far")  # type: ignore[list-item]
        error = until(conn, "error")[-1].error
    assert error.event_id == "evt_far" and error.param == "session.tools[0].server_url"


def test_a_rule_another_process_added_reaches_a_socket(tmp_path: Path) -> None:
    """Two apps on one SQLite state: a rule posted to the first fails the second's socket response,
    though the second serves no HTTP request in between."""
    state = f"sqlite:{tmp_path / 'state.db'}"
    with (
        serve_in_thread(create_app(Settings(frozen_time=FROZEN, state=state, backend="script"))) as first,
        serve_in_thread(create_app(Settings(frozen_time=FROZEN, state=state, backend="script"))) as second,
    ):
        client = openai.OpenAI(base_url=second.base_url, api_key="sk-test", max_retries=0)
        with client.realtime.connect(model="gpt-realtime", extra_headers={"x-mockserver-session": "fleet"}) as conn:
            until(conn, "session.created")
            rule = {"path": "/v1/realtime", "faults": "http.429", "session": "fleet"}
            httpx.post(f"{first.url}/__mockserver/rules", json=rule).raise_for_status()
            conn.response.create()
            events = until(conn, "response.done")
    assert next(e for e in events if e.type == "error").error.code == "rate_limit_exceeded"
    assert events[-1].response.status == "failed"


def test_a_server_that_does_not_answer_mcp_fails_its_listing_and_the_session_goes_on(scripted: Live) -> None:
    with _connect(scripted, "rt-mcp-down") as conn:
        until(conn, "session.created")
        down = {"type": "mcp", "server_label": "down", "server_url": f"{scripted.url}/v1/models"}  # not MCP
        up = {
            "type": "mcp",
            "server_label": "weather",
            "server_url": f"{scripted.url}/mcp",
            "require_approval": "never",
        }
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"], "tools": [down, up]})  # type: ignore[list-item]
        listed = until(conn, "mcp_list_tools.completed")
        events = _ask(conn, "Use get_time please.")
    assert [e.type for e in listed if e.type.startswith("mcp_list_tools")] == [
        "mcp_list_tools.in_progress",
        "mcp_list_tools.failed",
        "mcp_list_tools.in_progress",
        "mcp_list_tools.completed",
    ]
    call = events[-1].response.output[0]
    assert call.type == "mcp_call" and call.server_label == "weather" and call.name == "get_time"
