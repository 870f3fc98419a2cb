"""Google's Gemini wire over a real socket with raw HTTP: its bodies, both stream shapes, its
errors in Google's envelope, and the engine's features (seeds, scripted rules, faults, logprobs,
tools, structured output, the journal and metrics) on it. The official SDK's view is in
tests/contract/test_gemini.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest

from mockserver.answers.scripted import Script
from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.context import ServerContext
from tests.support.live import FROZEN, Live, serve_in_thread

Json = dict[str, Any]
MODEL = "gemini-2.5-flash"
GENERATE = f"/v1beta/models/{MODEL}:generateContent"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent"
ASK: Json = {
    "contents": [{"role": "user", "parts": [{"text": "Tell me about Lisbon."}]}],
    "generationConfig": {"maxOutputTokens": 12, "seed": 7},
}
WEATHER: Json = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "OBJECT",
        "properties": {"city": {"type": "STRING"}, "unit": {"type": "STRING", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
}


@pytest.fixture
def http(live: Live) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=60) as client:
        yield client


@pytest.fixture
def script(live: Live) -> Iterator[Script]:
    assert live.app is not None
    ctx: ServerContext = live.app.state.ctx
    yield ctx.script
    ctx.script.clear()


def _sse(text: str) -> list[Json]:
    return [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")]


def _text(chunks: list[Json], index: int = 0) -> str:
    return "".join(
        part.get("text", "")
        for chunk in chunks
        for c in chunk["candidates"]
        if c["index"] == index
        for part in c["content"]["parts"]
    )


def test_a_generation_in_geminis_shape(http: httpx.Client) -> None:
    r = http.post(GENERATE, json=ASK)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"candidates", "usageMetadata", "modelVersion", "responseId"}
    (candidate,) = body["candidates"]
    assert candidate["content"]["role"] == "model"
    assert candidate["finishReason"] in ("STOP", "MAX_TOKENS")
    usage = body["usageMetadata"]
    assert usage["candidatesTokenCount"] <= 12
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]
    counted = http.post(f"/v1beta/models/{MODEL}:countTokens", json={"contents": ASK["contents"]}).json()
    assert counted["totalTokens"] == usage["promptTokenCount"]  # countTokens says what a generation reads
    assert body["modelVersion"] == MODEL
    assert r.headers["x-mockserver-seed"] == "7"


@pytest.mark.parametrize("prefix", ["", "/gemini", "/gemini/v1"], ids=["root", "gemini-v1beta", "gemini-v1"])
def test_the_same_request_gives_the_same_bytes_on_every_path_and_in_both_stream_shapes(
    http: httpx.Client, prefix: str
) -> None:
    path = {"": GENERATE, "/gemini": "/gemini" + GENERATE}.get(prefix, "/gemini" + GENERATE.replace("/v1beta/", "/v1/"))
    first = http.post(path, json=ASK)
    again = http.post(path, json=ASK)
    assert first.status_code == again.status_code == 200
    assert first.content == again.content
    whole = first.json()
    stream = path.replace(":generateContent", ":streamGenerateContent")
    sse = http.post(stream + "?alt=sse", json=ASK)
    assert sse.headers["content-type"].startswith("text/event-stream")
    assert http.post(stream + "?alt=sse", json=ASK).content == sse.content
    array = http.post(stream, json=ASK)
    assert array.headers["content-type"] == "application/json"
    for chunks in (_sse(sse.text), array.json()):
        assert _text(chunks) == whole["candidates"][0]["content"]["parts"][0]["text"]
        assert chunks[-1]["usageMetadata"] == whole["usageMetadata"]
        assert chunks[-1]["candidates"][0]["finishReason"] == whole["candidates"][0]["finishReason"]
        assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
        assert len({c["responseId"] for c in chunks}) == 1


def test_spellings_google_accepts_read_alike(http: httpx.Client) -> None:
    """camelCase or snake_case, integers as 1.0 or "7": one request (the seed given, so the bytes
    but the id, which hashes the body as sent, are the same)."""
    camel = {**ASK, "generationConfig": {"maxOutputTokens": 8, "seed": 7, "topK": 1.0, "candidateCount": 2}}
    snake = {
        "contents": ASK["contents"],
        "generation_config": {"max_output_tokens": 8.0, "seed": "7", "top_k": 1, "candidate_count": 2},
    }
    a, b = http.post(GENERATE, json=camel).json(), http.post(GENERATE, json=snake).json()
    assert a["candidates"] == b["candidates"] and len(a["candidates"]) == 2
    assert a["candidates"][0]["content"] == a["candidates"][1]["content"]  # top-k 1: greedy for both


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"contents": [{"role": "bot", "parts": [{"text": "hi"}]}]}, "contents[0].role"),
        ({**ASK, "generationConfig": {"candidateCount": 9}}, "generationConfig.candidateCount"),
        ({**ASK, "generationConfig": {"temperature": 3}}, "generationConfig.temperature"),
        ({**ASK, "generationConfig": {"topK": 1.5}}, "generationConfig.topK"),
        ({**ASK, "generationConfig": {"logprobs": 3}}, "generationConfig.logprobs"),
        ({**ASK, "generationConfig": {"responseSchema": {"type": "OBJECT"}}}, "generationConfig.responseMimeType"),
        ({"contents": []}, "contents"),
        ({"contents": [{"role": "user", "parts": []}]}, "contents[0].parts"),
        (
            {**ASK, "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}},
            "toolConfig.functionCallingConfig.mode",
        ),
        ({**ASK, "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": 7}}]}]}, "tools"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_input_is_a_400_in_googles_envelope_naming_the_field(http: httpx.Client, body: Json, field: str) -> None:
    for path in (GENERATE, "/gemini/v1/models/gemini-2.5-flash:generateContent"):
        r = http.post(path, json=body)
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert set(error) == {"code", "message", "status"}
        assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
        assert field in error["message"], error["message"]


def test_errors_on_geminis_paths_are_googles_never_openais(http: httpx.Client) -> None:
    cases = [
        http.post(GENERATE, content=b"{not json"),
        http.post(f"/v1beta/models/{MODEL}:predictTheFuture", json=ASK),
        http.get("/v1beta/models/no-such-model"),
        http.get("/gemini/v1/nothing-here"),
        http.post(GENERATE, json={**ASK, "unknownField": 1}),  # lenient by default: answered
    ]
    assert [r.status_code for r in cases] == [400, 404, 404, 404, 200]
    for r in cases[:4]:
        assert set(r.json()["error"]) == {"code", "message", "status"}, r.text
        assert r.json()["error"]["code"] == r.status_code
    assert cases[2].json()["error"]["status"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("fault", "status", "name"),
    [
        ("http.429,retry_after=2", 429, "RESOURCE_EXHAUSTED"),
        ("http.503", 503, "UNAVAILABLE"),
        ("http.500", 500, "INTERNAL"),
    ],
)
def test_http_faults_answer_in_googles_envelope(http: httpx.Client, fault: str, status: int, name: str) -> None:
    r = http.post(GENERATE, json=ASK, headers={"x-mockserver-fault": fault})
    assert r.status_code == status
    assert r.json()["error"]["status"] == name and r.json()["error"]["code"] == status
    if status == 429:
        assert r.headers["retry-after"] == "2"


def test_a_stream_broken_midway_ends_with_googles_error(http: httpx.Client) -> None:
    r = http.post(STREAM + "?alt=sse", json=ASK, headers={"x-mockserver-fault": "stream.error_at=2"})
    events = _sse(r.text)
    assert r.status_code == 200 and len(events) == 2
    assert events[-1]["error"]["status"] == "INTERNAL"


def test_scripted_rules_answer_in_geminis_shape(http: httpx.Client, script: Script) -> None:
    script.add(match="Lisbon", text="Lisbon is on the Tagus.")
    body = http.post(GENERATE, json=ASK).json()
    assert body["candidates"][0]["content"]["parts"] == [{"text": "Lisbon is on the Tagus."}]
    assert body["candidates"][0]["finishReason"] == "STOP"
    script.clear()
    script.add(match="weather", tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}])
    ask = {
        "contents": [{"parts": [{"text": "What's the weather in Paris?"}]}],
        "tools": [{"functionDeclarations": [WEATHER]}],
    }
    for chunks in (http.post(GENERATE, json=ask).json(), *_sse(http.post(STREAM + "?alt=sse", json=ask).text)):
        parts = chunks["candidates"][0]["content"]["parts"]
        if any("functionCall" in p for p in parts):
            assert parts == [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]
            assert chunks["candidates"][0]["finishReason"] == "STOP"


def test_a_function_call_is_valid_against_its_declaration_and_a_result_ends_the_loop(http: httpx.Client) -> None:
    ask: Json = {
        "contents": [{"role": "user", "parts": [{"text": "What's the weather in Paris?"}]}],
        "tools": [{"functionDeclarations": [WEATHER]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
    }
    first = http.post(GENERATE, json=ask).json()
    (part,) = first["candidates"][0]["content"]["parts"]
    call = part["functionCall"]
    assert call["name"] == "get_weather"
    jsonschema.validate(
        call["args"],
        {
            **WEATHER["parameters"],
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        },
    )
    ask["contents"] += [
        first["candidates"][0]["content"],
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp_c": 21}}}]},
    ]
    del ask["toolConfig"]
    final = http.post(GENERATE, json=ask).json()
    parts = final["candidates"][0]["content"]["parts"]
    assert [list(p) for p in parts] == [["text"]] and "21" in parts[0]["text"]


def test_structured_output_follows_either_schema_field(http: httpx.Client) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "rank": {"type": "integer"}},
        "required": ["city", "rank"],
    }
    google = {
        "type": "OBJECT",
        "properties": {"city": {"type": "STRING"}, "rank": {"type": "INTEGER"}},
        "required": ["city", "rank"],
        "propertyOrdering": ["city", "rank"],
    }
    for config in (
        {"responseMimeType": "application/json", "responseJsonSchema": schema},
        {"response_mime_type": "application/json", "response_schema": google},
    ):
        body = http.post(GENERATE, json={"contents": ASK["contents"], "generationConfig": config}).json()
        jsonschema.validate(json.loads(body["candidates"][0]["content"]["parts"][0]["text"]), schema)


def test_logprobs_are_the_models_own(http: httpx.Client) -> None:
    config = {**ASK["generationConfig"], "responseLogprobs": True, "logprobs": 3}
    body = http.post(GENERATE, json={**ASK, "generationConfig": config}).json()
    candidate = body["candidates"][0]
    chosen = candidate["logprobsResult"]["chosenCandidates"]
    assert len(chosen) == body["usageMetadata"]["candidatesTokenCount"]
    assert "".join(c["token"] for c in chosen) == candidate["content"]["parts"][0]["text"]
    tops = candidate["logprobsResult"]["topCandidates"]
    assert all(len(t["candidates"]) == 3 for t in tops)
    for picked, top in zip(chosen, tops, strict=True):  # the chosen token scores no better than the best
        assert picked["logProbability"] <= top["candidates"][0]["logProbability"] + 1e-6
    assert candidate["avgLogprobs"] == pytest.approx(sum(c["logProbability"] for c in chosen) / len(chosen))


def test_models_are_listed_in_googles_shape(http: httpx.Client) -> None:
    listed = http.get("/v1beta/models").json()["models"]
    assert {"name": f"models/{MODEL}"}.items() <= listed[0].items()
    one = http.get(f"/gemini/v1/models/{MODEL}").json()
    assert one["name"] == f"models/{MODEL}" and "generateContent" in one["supportedGenerationMethods"]
    assert "data" in http.get("/v1/models").json()  # /v1/models at the root stays OpenAI's


def test_embeddings_one_and_a_batch(http: httpx.Client) -> None:
    model = "gemini-embedding-001"
    one = http.post(
        f"/v1beta/models/{model}:embedContent",
        json={"content": {"parts": [{"text": "hello"}]}, "outputDimensionality": 8},
    ).json()
    batch = http.post(
        f"/v1beta/models/{model}:batchEmbedContents",
        json={
            "requests": [
                {"model": f"models/{model}", "content": {"parts": [{"text": t}]}, "outputDimensionality": 8}
                for t in ("hello", "world")
            ]
        },
    ).json()
    assert len(one["embedding"]["values"]) == 8
    assert batch["embeddings"][0]["values"] == one["embedding"]["values"]
    assert batch["embeddings"][1]["values"] != one["embedding"]["values"]
    assert sum(v * v for v in one["embedding"]["values"]) == pytest.approx(1.0, abs=1e-5)


def test_the_journal_and_metrics_name_the_family(http: httpx.Client, live: Live) -> None:
    session = "gemini-journal"
    http.post(GENERATE, json=ASK, headers={"x-mockserver-session": session})
    journal = http.get("/__mockserver/journal", params={"session": session}).json()
    entries = journal["entries"]
    assert any(e.get("path", "").endswith(":generateContent") for e in entries), entries
    metrics = http.get("/metrics").text
    assert 'profile="gemini"' in metrics


def test_the_key_comes_as_x_goog_api_key_or_the_key_parameter() -> None:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, backend="script", api_keys=["k1"]))) as server:
        assert server.app is not None
        server.app.state.ctx.script.add(text="ok")
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert http.post(GENERATE, json=ASK, headers={"x-goog-api-key": "k1"}).status_code == 200
            assert http.post(GENERATE + "?key=k1", json=ASK).status_code == 200
            refused = http.post(GENERATE, json=ASK, headers={"x-goog-api-key": "nope"})
            assert refused.status_code == 401
            assert refused.json()["error"]["status"] == "UNAUTHENTICATED"
            assert http.post(GENERATE, json=ASK).status_code == 401


def test_rate_limits_answer_in_googles_envelope() -> None:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, backend="script", rate_limit_rpm=2))) as server:
        assert server.app is not None
        server.app.state.ctx.script.add(text="ok")
        with httpx.Client(base_url=server.url, timeout=30) as http:
            answers = [http.post(GENERATE, json=ASK, headers={"x-goog-api-key": "k1"}) for _ in range(3)]
    assert [r.status_code for r in answers] == [200, 200, 429]
    error = answers[2].json()["error"]
    assert error["status"] == "RESOURCE_EXHAUSTED" and error["code"] == 429
    assert float(answers[2].headers["retry-after"]) > 0


def test_rate_limits_are_per_key_and_per_model_named_in_the_path() -> None:
    """A Gemini request names its model in its path and its key in x-goog-api-key or ?key=: each
    (key, model) has its own bucket, as for OpenAI's bearer key and body model."""
    other = GENERATE.replace("gemini-2.5-flash", "gemini-2.5-pro")
    assert other != GENERATE
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, backend="script", rate_limit_rpm=1))) as server:
        assert server.app is not None
        server.app.state.ctx.script.add(text="ok")
        with httpx.Client(base_url=server.url, timeout=30) as http:
            statuses = [
                http.post(GENERATE, json=ASK, headers={"x-goog-api-key": "k1"}).status_code,
                http.post(GENERATE, json=ASK, headers={"x-goog-api-key": "k1"}).status_code,  # k1's bucket is empty
                http.post(GENERATE + "?key=k1", json=ASK).status_code,  # the same key, by the query
                http.post(GENERATE, json=ASK, headers={"x-goog-api-key": "k2"}).status_code,  # another key
                http.post(other, json=ASK, headers={"x-goog-api-key": "k1"}).status_code,  # another model
            ]
            rule = {"path": "/v1beta/models/*", "model": "gemini-2.5-pro", "faults": "http.503"}
            http.post("/__mockserver/rules", json=rule).raise_for_status()
            by_model = http.post(other, json=ASK, headers={"x-goog-api-key": "k3"}).status_code
            not_that_model = http.post(GENERATE, json=ASK, headers={"x-goog-api-key": "k3"}).status_code
    assert statuses == [200, 429, 429, 200, 200]
    assert (by_model, not_that_model) == (503, 200)  # a fault rule by model matches the model the path names


def test_sessions_keep_their_own_rules_on_gemini_too(http: httpx.Client, script: Script) -> None:
    script.add(match="Lisbon", text="Only for session A.", session="A")
    mine = http.post(GENERATE, json=ASK, headers={"x-mockserver-session": "A"}).json()
    theirs = http.post(GENERATE, json=ASK, headers={"x-mockserver-session": "B"}).json()
    assert mine["candidates"][0]["content"]["parts"] == [{"text": "Only for session A."}]
    assert theirs["candidates"][0]["content"]["parts"] != mine["candidates"][0]["content"]["parts"]


def test_latency_faults_pace_a_gemini_stream(http: httpx.Client) -> None:
    """The latency timeline runs under the engine for every family: the fault is applied and said."""
    r = http.post(STREAM + "?alt=sse", json=ASK, headers={"x-mockserver-fault": "latency.itl=1"})
    assert r.status_code == 200 and "latency.itl" in r.headers["x-mockserver-faults"]
    assert _text(_sse(r.text)) == http.post(GENERATE, json=ASK).json()["candidates"][0]["content"]["parts"][0]["text"]


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def test_an_inline_image_is_counted_as_its_own_modality(http: httpx.Client) -> None:
    parts = [{"text": "What is this?"}, {"inlineData": {"mimeType": "image/png", "data": PNG}}]
    ask = {"contents": [{"role": "user", "parts": parts}], "generationConfig": {"maxOutputTokens": 4}}
    text = http.post(GENERATE, json={**ask, "contents": [{"role": "user", "parts": parts[:1]}]}).json()
    seen = http.post(GENERATE, json=ask).json()
    details = {d["modality"]: d["tokenCount"] for d in seen["usageMetadata"]["promptTokensDetails"]}
    assert details["TEXT"] == text["usageMetadata"]["promptTokenCount"]
    assert details["IMAGE"] > 0 and sum(details.values()) == seen["usageMetadata"]["promptTokenCount"]
    counted = http.post(f"/v1beta/models/{MODEL}:countTokens", json={"contents": ask["contents"]}).json()
    assert counted["totalTokens"] == seen["usageMetadata"]["promptTokenCount"]
    bad = {"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "!!"}}]}]}
    assert http.post(GENERATE, json=bad).json()["error"]["status"] == "INVALID_ARGUMENT"


def test_thoughts_come_first_and_are_counted_when_asked_for(http: httpx.Client) -> None:
    config = {"maxOutputTokens": 40, "thinkingConfig": {"thinkingBudget": 8, "includeThoughts": True}}
    ask = {"contents": ASK["contents"], "generationConfig": config}
    body = http.post(GENERATE, json=ask).json()
    parts = body["candidates"][0]["content"]["parts"]
    assert parts[0]["thought"] is True and "thought" not in parts[-1]
    assert body["usageMetadata"]["thoughtsTokenCount"] == 8
    chunks = _sse(http.post(STREAM + "?alt=sse", json=ask).text)
    thought = "".join(p["text"] for c in chunks for p in c["candidates"][0]["content"]["parts"] if p.get("thought"))
    assert thought == parts[0]["text"]
    hidden = {**ask, "generationConfig": {**config, "thinkingConfig": {"thinkingBudget": 8}}}
    assert all("thought" not in p for p in http.post(GENERATE, json=hidden).json()["candidates"][0]["content"]["parts"])


def test_strict_refuses_a_field_google_does_not_know_in_either_spelling() -> None:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, backend="script", strict=True))) as server:
        assert server.app is not None
        server.app.state.ctx.script.add(text="ok")
        with httpx.Client(base_url=server.url, timeout=30) as http:
            snake = {"contents": ASK["contents"], "generation_config": {"max_output_tokens": 4}}
            assert http.post(GENERATE, json=snake).status_code == 200
            refused = http.post(GENERATE, json={**ASK, "messages": []})
    assert refused.status_code == 400
    assert refused.json()["error"]["status"] == "INVALID_ARGUMENT" and "messages" in refused.json()["error"]["message"]


def test_a_context_overflow_names_geminis_fields(http: httpx.Client) -> None:
    r = http.post(GENERATE, json={**ASK, "generationConfig": {"maxOutputTokens": 10**9}})
    assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"
    message = r.json()["error"]["message"]
    assert "generationConfig.maxOutputTokens" in message and "max_tokens" not in message
    long = {"contents": [{"role": "user", "parts": [{"text": "word " * 20000}]}]}
    for method in ("generateContent", "countTokens"):
        r = http.post(f"/v1beta/models/{MODEL}:{method}", json=long)
        assert r.status_code == 400 and "contents" in r.json()["error"]["message"], r.text
        assert "messages" not in r.json()["error"]["message"]


def test_each_candidate_of_a_stream_joins_into_its_non_streamed_twin(http: httpx.Client) -> None:
    ask = {**ASK, "generationConfig": {"maxOutputTokens": 6, "seed": 3, "candidateCount": 3}}
    whole = http.post(GENERATE, json=ask).json()
    chunks = _sse(http.post(STREAM + "?alt=sse", json=ask).text)
    assert len(whole["candidates"]) == 3
    for candidate in whole["candidates"]:
        index = candidate["index"]
        assert _text(chunks, index) == candidate["content"]["parts"][0]["text"]
        ends = [
            c["finishReason"]
            for chunk in chunks
            for c in chunk["candidates"]
            if c["index"] == index and "finishReason" in c
        ]
        assert ends == [candidate["finishReason"]]
