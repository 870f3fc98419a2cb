"""Anthropic's Messages wire, driven by the official ``anthropic`` SDK over a real socket.

Single calls (scripted and the model's), streams folded by the SDK's own helper equal to the
non-streamed twin, a hand tool loop that ends in at most three calls with inputs valid against
each tool's ``input_schema``, extended thinking, stop sequences, ``count_tokens`` equal to what a
create reports, Anthropic's models list, and the same bytes for the same request.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import jsonschema
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread

MODEL = "claude-sonnet-5"
WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"],
    },
}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]
ASK_BODY = {"model": MODEL, "max_tokens": 32, "messages": ASK}
BASES = ("/anthropic", "")  # Anthropic(base_url=URL + "/anthropic"), and Anthropic's paths at the root


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    """The default chain (scripted answers, then the model)."""
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as live:
        yield live


@pytest.fixture
def live(server: Live) -> Iterator[Live]:
    assert server.app is not None
    ctx = server.app.state.ctx
    yield server
    ctx.script.clear()
    ctx.chaos.reset()


@pytest.fixture(params=BASES, ids=["prefix", "root"])
def client(request: pytest.FixtureRequest, live: Live) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=live.url + request.param, api_key="sk-ant-test", max_retries=0) as c:
        yield c


def _script(live: Live, **rule: Any) -> None:
    assert live.app is not None
    live.app.state.ctx.script.add(**rule)


def _folded(client: anthropic.Anthropic, **kwargs: Any) -> anthropic.types.Message:
    with client.messages.stream(**kwargs) as stream:
        for _ in stream:
            pass
        return stream.get_final_message()


def _twins(client: anthropic.Anthropic, **kwargs: Any) -> anthropic.types.Message:
    """The non-streamed answer, after checking its stream folds into the same message."""
    message = client.messages.create(**kwargs)
    assert _folded(client, **kwargs).model_dump() == message.model_dump()
    return message


def test_scripted_text_and_its_stream(client: anthropic.Anthropic, live: Live) -> None:
    _script(live, match="weather", text="Sunny, 21 °C.")
    message = _twins(client, model=MODEL, max_tokens=64, messages=ASK)
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "Sunny, 21 °C."  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert message.id.startswith("msg_") and message.model == MODEL and message.role == "assistant"
    assert message.usage.output_tokens > 0
    assert message._request_id is not None and message._request_id.startswith("req_")


def test_count_tokens_equals_what_a_create_reports(client: anthropic.Anthropic) -> None:
    png = _png()
    body: dict[str, Any] = {
        "model": MODEL,
        "system": [{"type": "text", "text": "You are terse."}],
        "tools": [WEATHER],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture, and the weather in Oslo?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
                ],
            }
        ],
    }
    counted = client.messages.count_tokens(**body).input_tokens
    created = client.messages.create(max_tokens=32, **body)
    assert counted == created.usage.input_tokens
    without_image = client.messages.count_tokens(**{**body, "messages": [{"role": "user", "content": "x"}]})
    assert without_image.input_tokens < counted


def test_a_hand_tool_loop_ends_within_three_calls(client: anthropic.Anthropic) -> None:
    messages: list[dict[str, Any]] = list(ASK)
    calls = 0
    for calls in range(1, 4):  # noqa: B007 (read after the loop: how many calls it took)
        message = _twins(client, model=MODEL, max_tokens=64, messages=messages, tools=[WEATHER])
        if message.stop_reason != "tool_use":
            break
        uses = [b for b in message.content if b.type == "tool_use"]
        assert uses and all(u.id.startswith("toolu_") and u.name == "get_weather" for u in uses)
        for use in uses:
            jsonschema.validate(use.input, WEATHER["input_schema"])
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": u.id, "content": "18 degrees and sunny"} for u in uses
                ],
            }
        )
    assert message.stop_reason == "end_turn" and calls <= 3
    assert "18 degrees and sunny" in message.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "any"}, "tool_use"),
        ({"type": "tool", "name": "get_weather"}, "tool_use"),
        ({"type": "none"}, "end_turn"),
    ],
    ids=["any", "tool", "none"],
)
def test_tool_choice(client: anthropic.Anthropic, choice: dict[str, Any], expected: str) -> None:
    message = client.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": "Hello there."}],
        tools=[WEATHER],
        tool_choice=choice,  # type: ignore[arg-type]
    )
    assert message.stop_reason in ((expected,) if expected == "tool_use" else ("end_turn", "max_tokens"))
    assert any(b.type == "tool_use" for b in message.content) == (expected == "tool_use")


def test_a_scripted_tool_call_is_a_tool_use_block(client: anthropic.Anthropic, live: Live) -> None:
    _script(live, match="Oslo", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}])
    message = _twins(
        client, model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Oslo?"}], tools=[WEATHER]
    )
    (use,) = message.content
    assert use.type == "tool_use" and use.input == {"city": "Oslo"} and message.stop_reason == "tool_use"


def test_extended_thinking_blocks_carry_a_signature(client: anthropic.Anthropic) -> None:
    message = _twins(
        client,
        model=MODEL,
        max_tokens=1100,
        messages=[{"role": "user", "content": "Think about Lisbon."}],
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    assert message.content[0].type == "thinking"
    thinking = message.content[0]
    assert thinking.thinking and base64.b64decode(thinking.signature)  # type: ignore[union-attr]
    counted = client.messages.count_tokens(
        model=MODEL,
        messages=[{"role": "user", "content": "Think about Lisbon."}],
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    assert counted.input_tokens == message.usage.input_tokens


def test_stop_sequences(client: anthropic.Anthropic, live: Live) -> None:
    _script(live, match="count", text="one, two, three, four")
    message = _twins(
        client,
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": "count to four"}],
        stop_sequences=["three"],
    )
    assert message.content[0].text == "one, two, "  # type: ignore[union-attr]
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "three"


def test_max_tokens_ends_with_its_stop_reason(client: anthropic.Anthropic, live: Live) -> None:
    _script(live, match="long", text="a long answer that goes on and on and on for many tokens")
    message = _twins(client, model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "long"}])
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 3


def test_models_in_anthropics_shape(client: anthropic.Anthropic) -> None:
    page = client.models.list()
    assert [m.id for m in page.data][:1] == [MODEL]
    assert all(m.type == "model" and m.display_name for m in page.data)
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve("claude-none")


def test_same_request_same_bytes(live: Live) -> None:
    body = {"model": MODEL, "max_tokens": 24, "messages": [{"role": "user", "content": "Tell me about Lisbon."}]}
    with httpx.Client(base_url=live.url, timeout=60) as http:
        for stream in (False, True):
            sent = {**body, "stream": stream}
            first, second = (http.post("/v1/messages", json=sent) for _ in range(2))
            assert first.status_code == second.status_code == 200
            assert first.content == second.content
            assert first.headers["request-id"] == second.headers["request-id"]
        seeded = [http.post("/v1/messages", json={**body, "seed": s}).json()["content"] for s in (1, 2)]
        assert seeded[0] != seeded[1]  # the seed is what decides (an extension: Anthropic has none)


def _png() -> str:
    """A tiny valid PNG, base64 (made here: nothing is read from disk or the network)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 8 for _ in range(8))
    out = io.BytesIO()
    out.write(b"\x89PNG\r\n\x1a\n")
    out.write(chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)))
    out.write(chunk(b"IDAT", zlib.compress(raw)))
    out.write(chunk(b"IEND", b""))
    return base64.b64encode(out.getvalue()).decode()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_the_sdks_tool_runner_ends_within_three_calls(live: Live, stream: bool) -> None:
    """The 2.x tool runner keeps its conversation in a server-side thread (each turn sends only
    its new messages, ``thread: continue``): the loop ends as the hand loop does."""
    session = f"tool-runner-{stream}"

    @anthropic.beta_tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        return f"It is 21 degrees and sunny in {city}."

    with anthropic.Anthropic(
        base_url=live.url + "/anthropic",
        api_key="sk-ant-test",
        max_retries=0,
        default_headers={"x-mockserver-session": session},
    ) as client:
        runner = client.beta.messages.tool_runner(
            model=MODEL, max_tokens=256, tools=[get_weather], messages=ASK, stream=stream
        )
        final = runner.until_done()
    calls = httpx.get(live.url + "/__mockserver/journal", params={"session": session}).json()["entries"]
    assert [c["status"] for c in calls] == [200] * len(calls) and len(calls) <= 3
    assert calls[-1]["body"]["thread"]["type"] == "continue"
    assert final.stop_reason == "end_turn" and "21 degrees" in final.content[-1].text  # type: ignore[union-attr]


def test_a_thread_nobody_kept_is_thread_not_found(live: Live) -> None:
    """Anthropic's 404 with ``error.details.error_code``: the SDK then sends the whole history."""
    body = {**ASK_BODY, "thread": {"type": "continue", "previous_message_id": "msg_nobody"}}
    answer = httpx.post(live.url + "/v1/messages", json=body, headers={"x-api-key": "k"})
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["type"] == "not_found_error" and error["details"] == {"error_code": "thread_not_found"}


def test_text_beside_tool_results_does_not_restart_the_loop(client: anthropic.Anthropic) -> None:
    """Agents (Claude Code among them) send notes beside their tool results: the turn still
    answers the calls, so the loop ends with text."""
    first = client.messages.create(model=MODEL, max_tokens=64, messages=ASK, tools=[WEATHER])
    (use,) = [b for b in first.content if b.type == "tool_use"]
    results: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": use.id, "content": "18 degrees"},
        {"type": "text", "text": "Remember to be brief."},
    ]
    messages = [
        *ASK,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": results},
    ]
    final = client.messages.create(model=MODEL, max_tokens=64, messages=messages, tools=[WEATHER])
    assert final.stop_reason == "end_turn"
