"""The official ``google-genai`` SDK against mockserver's Gemini wire, over a real socket: single
calls, streams folded by the SDK's own accessors equal to the non-streamed answer, automatic
function calling ending its loop within three calls, structured output parsed by the SDK,
Google's errors as the SDK's exceptions, and a recording of Gemini traffic replaying its own
bytes. The frameworks (LangChain's ChatGoogleGenerativeAI, pydantic-ai's GoogleModel) are in
tests/contract/test_gemini_frameworks.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from google import genai
from google.genai import errors, types
from pydantic import BaseModel

from mockserver.answers.scripted import Script
from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.context import ServerContext
from tests.support.live import FROZEN, Live, serve_in_thread

MODEL = "gemini-2.5-flash"
MAX_CALLS = 3
QUESTION = "Tell me about Lisbon."
CONFIG = types.GenerateContentConfig(seed=7, max_output_tokens=16)


def _client(url: str, version: str = "v1", session: str | None = None) -> genai.Client:
    headers = {"x-mockserver-session": session} if session else None
    options = types.HttpOptions(base_url=url + "/gemini", api_version=version, headers=headers)
    return genai.Client(api_key="test-key", http_options=options)


@pytest.fixture
def gemini(live: Live) -> genai.Client:
    return _client(live.url)


@pytest.fixture
def script(live: Live) -> Iterator[Script]:
    assert live.app is not None
    ctx: ServerContext = live.app.state.ctx
    yield ctx.script
    ctx.script.clear()


@pytest.mark.parametrize("version", ["v1", "v1beta"])
def test_a_single_call_and_its_stream_folded_by_the_sdk_agree(live: Live, version: str) -> None:
    gemini = _client(live.url, version)
    whole = gemini.models.generate_content(model=MODEL, contents=QUESTION, config=CONFIG)
    assert whole.text and whole.candidates and whole.usage_metadata
    assert whole.candidates[0].finish_reason in (types.FinishReason.STOP, types.FinishReason.MAX_TOKENS)
    assert whole.usage_metadata.candidates_token_count is not None
    assert whole.usage_metadata.candidates_token_count <= 16
    chunks = list(gemini.models.generate_content_stream(model=MODEL, contents=QUESTION, config=CONFIG))
    assert len(chunks) > 1
    assert "".join(c.text or "" for c in chunks) == whole.text
    assert chunks[-1].usage_metadata == whole.usage_metadata
    assert chunks[-1].candidates and chunks[-1].candidates[0].finish_reason == whole.candidates[0].finish_reason
    assert len({c.response_id for c in chunks}) == 1
    counted = gemini.models.count_tokens(model=MODEL, contents=QUESTION)
    assert counted.total_tokens == whole.usage_metadata.prompt_token_count


async def test_the_async_client_and_its_stream_agree(live: Live) -> None:
    client = _client(live.url)
    gemini = client.aio
    whole = await gemini.models.generate_content(model=MODEL, contents=QUESTION, config=CONFIG)
    text = ""
    async for chunk in await gemini.models.generate_content_stream(model=MODEL, contents=QUESTION, config=CONFIG):
        text += chunk.text or ""
    assert text == whole.text


def test_a_seed_gives_the_same_answer_on_another_server(gemini: genai.Client) -> None:
    first = gemini.models.generate_content(model=MODEL, contents=QUESTION, config=CONFIG)
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as other:
        client = _client(other.url)  # held: a Client closes its connections when collected
        again = client.models.generate_content(model=MODEL, contents=QUESTION, config=CONFIG)
    assert again.model_dump(exclude={"sdk_http_response"}) == first.model_dump(exclude={"sdk_http_response"})


def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"It is 21 degrees and sunny in {city}."


def test_automatic_function_calling_ends_within_three_calls(live: Live) -> None:
    session = f"gemini-afc-{uuid.uuid4().hex[:8]}"
    client = _client(live.url, session=session)
    chat = client.chats.create(model=MODEL, config=types.GenerateContentConfig(tools=[get_weather]))
    reply = chat.send_message("What's the weather in Paris?")
    assert reply.text and "21 degrees and sunny" in reply.text
    history = chat.get_history()
    called = [p.function_call for c in history for p in c.parts or () if p.function_call]
    assert [c.name for c in called] == ["get_weather"]
    calls = httpx.get(live.url + "/__mockserver/journal", params={"session": session}).json()["entries"]
    assert 2 <= len(calls) <= MAX_CALLS
    assert all(e["path"].endswith(":generateContent") for e in calls)


def test_scripted_rules_reach_the_sdk_in_geminis_shape(gemini: genai.Client, script: Script) -> None:
    script.add(match="Lisbon", text="Lisbon is on the Tagus.")
    assert gemini.models.generate_content(model=MODEL, contents=QUESTION).text == "Lisbon is on the Tagus."
    script.clear()
    script.add(match="weather", tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}])
    config = types.GenerateContentConfig(
        tools=[get_weather], automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True)
    )
    reply = gemini.models.generate_content(model=MODEL, contents="What's the weather in Paris?", config=config)
    assert reply.function_calls and reply.function_calls[0].name == "get_weather"
    assert reply.function_calls[0].args == {"city": "Paris"}
    streamed = gemini.models.generate_content_stream(
        model=MODEL, contents="What's the weather in Paris?", config=config
    )
    assert [c for chunk in streamed for c in chunk.function_calls or ()] == reply.function_calls


class City(BaseModel):
    name: str
    country: str
    population: int


@pytest.mark.parametrize("field", ["response_schema", "response_json_schema"])
def test_structured_output_parses_into_the_callers_model(gemini: genai.Client, field: str) -> None:
    schema = City if field == "response_schema" else City.model_json_schema()
    config = types.GenerateContentConfig(response_mime_type="application/json", **{field: schema})
    reply = gemini.models.generate_content(model=MODEL, contents="A city, as JSON.", config=config)
    City.model_validate_json(reply.text or "")
    if field == "response_schema":
        assert isinstance(reply.parsed, City)


def test_logprobs_come_back_through_the_sdk(gemini: genai.Client) -> None:
    config = types.GenerateContentConfig(seed=7, max_output_tokens=8, response_logprobs=True, logprobs=2)
    reply = gemini.models.generate_content(model=MODEL, contents=QUESTION, config=config)
    assert reply.candidates
    result = reply.candidates[0].logprobs_result
    assert result and result.chosen_candidates and result.top_candidates
    assert "".join(c.token or "" for c in result.chosen_candidates) == reply.text
    assert all(len(t.candidates or ()) == 2 for t in result.top_candidates)


def test_embeddings_and_models_through_the_sdk(gemini: genai.Client) -> None:
    embedded = gemini.models.embed_content(
        model="gemini-embedding-001",
        contents=["hello", "world"],
        config=types.EmbedContentConfig(output_dimensionality=16),
    )
    assert embedded.embeddings and [len(e.values or ()) for e in embedded.embeddings] == [16, 16]
    model = gemini.models.get(model=MODEL)
    assert model.name == f"models/{MODEL}"
    assert any(m.name == f"models/{MODEL}" for m in gemini.models.list())


def test_errors_are_the_sdks_own_exceptions(live: Live, gemini: genai.Client) -> None:
    with pytest.raises(errors.ClientError) as bad:
        gemini.models.generate_content(
            model=MODEL, contents=QUESTION, config=types.GenerateContentConfig(candidate_count=9)
        )
    assert bad.value.code == 400 and bad.value.status == "INVALID_ARGUMENT"
    assert "candidateCount" in (bad.value.message or "")
    for fault, kind, code, status in (
        ("http.429", errors.ClientError, 429, "RESOURCE_EXHAUSTED"),
        ("http.503", errors.ServerError, 503, "UNAVAILABLE"),
    ):
        options = types.HttpOptions(base_url=live.url + "/gemini", headers={"x-mockserver-fault": fault})
        faulty = genai.Client(api_key="test-key", http_options=options)
        with pytest.raises(kind) as raised:
            faulty.models.generate_content(model=MODEL, contents=QUESTION)
        assert raised.value.code == code and raised.value.status == status
    with pytest.raises(errors.ClientError) as missing:
        gemini.models.get(model="no-such-model")
    assert missing.value.code == 404 and missing.value.status == "NOT_FOUND"


def test_a_recording_of_gemini_traffic_replays_its_own_bytes(live: Live, tmp_path: Path) -> None:
    """Record through a recording server in front of ``live`` (the upstream), then replay with
    no model: the same bytes for the body and for both stream shapes, and the SDK reads them."""
    stream = f"/v1beta/models/{MODEL}:streamGenerateContent"
    requests = [
        (f"/v1beta/models/{MODEL}:generateContent", ""),
        (stream, "?alt=sse"),
        (stream, ""),
    ]
    body = {"contents": [{"role": "user", "parts": [{"text": QUESTION}]}], "generationConfig": {"seed": 7}}
    recording = Settings(cassettes=str(tmp_path), record_mode="all", upstream=live.url, frozen_time=FROZEN)
    recorded: list[bytes] = []
    with serve_in_thread(create_app(recording)) as recorder, httpx.Client(timeout=60) as http:
        for path, query in requests:
            answer = http.post(recorder.url + path + query, json=body, headers={"x-goog-api-key": "AIza" + "x" * 35})
            assert answer.status_code == 200 and answer.headers["x-mockserver-source"] == "record"
            recorded.append(answer.content)
    assert "AIza" not in "".join(p.read_text() for p in tmp_path.rglob("*.yaml"))  # the key is not written
    replaying = Settings(cassettes=str(tmp_path), backend="script,replay", frozen_time=FROZEN)
    with serve_in_thread(create_app(replaying)) as replay, httpx.Client(timeout=60) as http:
        for (path, query), before in zip(requests, recorded, strict=True):
            answer = http.post(replay.url + path + query, json=body)
            assert answer.headers["x-mockserver-source"] == "replay"
            assert answer.content == before
        sdk = _client(replay.url, "v1beta")
        config = types.GenerateContentConfig(seed=7)
        whole = sdk.models.generate_content(model=MODEL, contents=QUESTION, config=config)
        streamed = "".join(
            c.text or "" for c in sdk.models.generate_content_stream(model=MODEL, contents=QUESTION, config=config)
        )
        assert whole.text and streamed == whole.text


def test_an_error_mid_stream_is_raised_by_the_sdk(live: Live) -> None:
    options = types.HttpOptions(base_url=live.url + "/gemini", headers={"x-mockserver-fault": "stream.error_at=2"})
    faulty = genai.Client(api_key="test-key", http_options=options)
    seen: list[str] = []
    with pytest.raises(errors.ServerError) as raised:
        for chunk in faulty.models.generate_content_stream(model=MODEL, contents=QUESTION, config=CONFIG):
            seen.append(chunk.text or "")
    assert len(seen) == 1 and raised.value.code == 500 and raised.value.status == "INTERNAL"
