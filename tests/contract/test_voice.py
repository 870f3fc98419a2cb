"""Voice with the official openai SDK as the client: audio resources (TTS → STT round trip, streamed
both ways), and the Realtime API through ``client.realtime.connect`` — every server event valid
against the SDK's own event types, and an agent loop with one function tool over the socket."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import openai
import pytest
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

SERVER_EVENT: TypeAdapter[Any] = TypeAdapter(RealtimeServerEvent)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}


@pytest.mark.asyncio
async def test_tts_then_stt_round_trip_with_the_async_sdk(async_client: openai.AsyncOpenAI) -> None:
    said = "Meet me at the station at nine, platform four."
    async with async_client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="marin", input=said, response_format="mp3", instructions="Calm."
    ) as response:
        audio = b"".join([chunk async for chunk in response.iter_bytes()])
    assert response.headers["content-type"] == "audio/mpeg"
    text = await async_client.audio.transcriptions.create(model="gpt-4o-transcribe", file=("said.mp3", audio))
    assert text.text == said
    plain = await async_client.audio.transcriptions.create(
        model="whisper-1", file=("said.mp3", audio), response_format="text"
    )
    assert str(plain).strip() == said
    streamed = [
        event
        async for event in await async_client.audio.transcriptions.create(
            model="gpt-4o-mini-transcribe", file=("said.mp3", audio), stream=True
        )
    ]
    assert streamed[-1].type == "transcript.text.done" and streamed[-1].text == said


@pytest.mark.asyncio
async def test_a_realtime_agent_loop_with_one_function_tool(async_client: openai.AsyncOpenAI) -> None:
    raw: list[dict[str, Any]] = []

    async with async_client.realtime.connect(model="gpt-realtime") as conn:

        async def until(kind: str) -> list[dict[str, Any]]:
            seen = []
            while True:
                event = json.loads(await conn.recv_bytes())
                SERVER_EVENT.validate_python(event)  # the SDK's own types accept it
                raw.append(event)
                seen.append(event)
                if event["type"] == kind:
                    return seen

        await until("session.created")
        await conn.session.update(
            session={"type": "realtime", "output_modalities": ["text"], "tools": [WEATHER]}  # type: ignore[list-item]
        )
        await until("session.updated")
        await conn.conversation.item.create(
            item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]}
        )
        await conn.response.create()
        first = (await until("response.done"))[-1]["response"]
        calls = [item for item in first["output"] if item["type"] == "function_call"]
        assert len(calls) == 1 and calls[0]["name"] == "get_weather"
        arguments = json.loads(calls[0]["arguments"])
        jsonschema.validate(arguments, WEATHER["parameters"])
        assert arguments["city"] == "Oslo"  # the question's value, as chat fills it
        deltas = "".join(e["delta"] for e in raw if e["type"] == "response.function_call_arguments.delta")
        assert deltas == calls[0]["arguments"]
        await conn.conversation.item.create(
            item={"type": "function_call_output", "call_id": calls[0]["call_id"], "output": '{"temp_c": 4}'}
        )
        await conn.response.create()
        final = (await until("response.done"))[-1]["response"]
        assert [item["type"] for item in final["output"]] == ["message"]  # the loop ends, as in chat
        assert "4" in final["output"][0]["content"][0]["text"]
        assert final["status"] == "completed" and final["usage"]["total_tokens"] > 0
