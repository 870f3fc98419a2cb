"""The rest of the surface clients call: moderations, Azure OpenAI's paths, ``x-request-id``,
``responses.compact``, ``models.delete`` and vLLM's tokenizer routes — through the official SDK
where it has a method, validated against OpenAI's schemas, byte-stable, and with a 4xx
envelope naming the parameter for bad input on every one of them."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types import ModerationMultiModalInputParam

from mockserver.gpt.tokenizer import Tokenizer
from tests.support.live import Live
from tests.support.spec import validate

API_VERSION = "2024-10-21"


@pytest.fixture(scope="module")
def http(live: Live) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as c:
        yield c


@pytest.fixture
def azure(live: Live) -> Iterator[openai.AzureOpenAI]:
    with openai.AzureOpenAI(azure_endpoint=live.url, api_key="azure-key", api_version=API_VERSION, max_retries=0) as c:
        yield c


# ---- moderations -----------------------------------------------------------------------------


def test_moderations_flag_by_the_documented_words_only(client: openai.OpenAI) -> None:
    answer = client.moderations.with_raw_response.create(
        input=["I will kill you, moron", "What a lovely day", "[flag:sexual/minors] marker"]
    )
    validate("CreateModerationResponse", answer.http_response.json())
    threat, calm, marked = answer.parse().results
    assert answer.parse().model == "omni-moderation-latest"
    assert threat.flagged and threat.categories.violence and threat.categories.harassment
    assert threat.category_scores.violence >= 0.9 and threat.category_scores.hate < 0.001
    assert not calm.flagged and not any(calm.categories.model_dump().values())
    # A subcategory's marker flags it and its parent.
    assert marked.categories.sexual_minors and marked.categories.sexual and not marked.categories.violence


def test_moderations_multimodal_parts_are_one_result(client: openai.OpenAI) -> None:
    parts: list[ModerationMultiModalInputParam] = [
        {"type": "text", "text": "a picture of gore"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
    ]
    answer = client.moderations.create(model="omni-moderation-2024-09-26", input=parts)
    assert answer.model == "omni-moderation-2024-09-26"
    (result,) = answer.results
    assert result.categories.violence_graphic
    applied = result.category_applied_input_types
    assert applied is not None
    assert applied.violence == ["text", "image"] and applied.hate == ["text"]


def test_moderations_text_models_have_no_illicit_categories(http: httpx.Client) -> None:
    body = http.post("/v1/moderations", json={"model": "text-moderation-stable", "input": "counterfeit"}).json()
    validate("CreateModerationResponse", body)
    (result,) = body["results"]
    assert result["categories"]["illicit"] is None and not result["flagged"]
    assert result["category_applied_input_types"]["illicit"] == []


# ---- models.delete -----------------------------------------------------------------------------


def test_a_fine_tuned_model_is_deleted(client: openai.OpenAI) -> None:
    model = "ft:gpt-4o-mini:acemeco:suffix:abc123"
    raw = client.models.with_raw_response.delete(model)
    validate("DeleteModelResponse", raw.http_response.json())
    deleted = raw.parse()
    assert (deleted.id, deleted.object, deleted.deleted) == (model, "model", True)


def test_a_base_model_cannot_be_deleted(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.delete("gpt-4o-mini")
    validate("ErrorResponse", caught.value.response.json())
    assert caught.value.code == "model_not_found" and caught.value.param == "model"


# ---- responses.compact ---------------------------------------------------------------------


def test_compact_keeps_user_messages_then_one_compaction_item(client: openai.OpenAI) -> None:
    conversation: Any = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C and sunny"},
        {"role": "assistant", "content": "It is 18C and sunny."},
        {"role": "user", "content": "And tomorrow?"},
    ]
    raw = client.responses.with_raw_response.compact(model="gpt-4o-mini", input=conversation)
    body = raw.http_response.json()
    validate("CompactResource", body)
    compacted = raw.parse()
    assert compacted.object == "response.compaction"
    *kept, item = body["output"]
    assert [m["content"][0]["text"] for m in kept] == ["What is the weather in Paris?", "And tomorrow?"]
    assert all(m["role"] == "user" for m in kept)
    assert item["type"] == "compaction"
    record = json.loads(base64.b64decode(item["encrypted_content"]))
    assert ["tool", "18C and sunny"] in record["turns"]
    usage = compacted.usage
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens > 0


def test_compact_continues_a_stored_response(client: openai.OpenAI) -> None:
    first = client.responses.create(model="gpt-4o-mini", input="Name a colour.", max_output_tokens=16)
    compacted = client.responses.compact(model="gpt-4o-mini", previous_response_id=first.id, input="Another?")
    texts = [getattr(item, "content", [None])[0] for item in compacted.output[:-1]]
    assert [t.text for t in texts if t is not None] == ["Name a colour.", "Another?"]
    assert compacted.output[-1].type == "compaction"


def test_compact_with_the_model_alone_is_an_empty_compaction(client: openai.OpenAI) -> None:
    compacted = client.responses.compact(model="gpt-4o-mini")
    assert [item.type for item in compacted.output] == ["compaction"]


# ---- Azure OpenAI ------------------------------------------------------------------------------


def test_azure_chat_embeddings_and_responses(azure: openai.AzureOpenAI) -> None:
    raw = azure.chat.completions.with_raw_response.create(
        model="my-deployment", messages=[{"role": "user", "content": "Hello"}], max_tokens=8
    )
    assert raw.http_request.url.path == "/openai/deployments/my-deployment/chat/completions"
    assert raw.http_request.url.params["api-version"] == API_VERSION
    validate("CreateChatCompletionResponse", raw.http_response.json())
    assert raw.parse().model == "my-deployment"
    vectors = azure.embeddings.create(model="embedder", input="Hello")
    assert vectors.model == "embedder" and len(vectors.data[0].embedding) == 1536
    response = azure.responses.create(model="gpt-4o-mini", input="Hello", max_output_tokens=16)
    assert response.status == "completed"


def test_azure_deployment_client_names_the_model(live: Live) -> None:
    with openai.AzureOpenAI(
        azure_endpoint=live.url, api_key="k", api_version=API_VERSION, azure_deployment="prod-gpt", max_retries=0
    ) as azure:
        answer = azure.chat.completions.create(
            model="ignored", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
        )
        assert answer.model == "prod-gpt"  # Azure routes by the deployment, not the body's model
        assert azure.moderations.create(input="hello").results[0].flagged is False  # /openai/moderations


def test_azure_body_may_leave_out_the_model(http: httpx.Client) -> None:
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    answer = http.post(f"/openai/deployments/dep-1/chat/completions?api-version={API_VERSION}", json=body)
    assert answer.status_code == 200 and answer.json()["model"] == "dep-1"


def test_azure_api_key_header_is_a_bearer_key(live: Live) -> None:
    from mockserver.app import create_app
    from mockserver.config import Settings
    from tests.support.live import FROZEN, serve_in_thread

    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, api_keys=["good"]))) as keyed:
        with openai.AzureOpenAI(
            azure_endpoint=keyed.url, api_key="good", api_version=API_VERSION, max_retries=0
        ) as azure:
            assert azure.models.list().data
        with (
            openai.AzureOpenAI(
                azure_endpoint=keyed.url, api_key="bad", api_version=API_VERSION, max_retries=0
            ) as azure,
            pytest.raises(openai.AuthenticationError),
        ):
            azure.models.list()


# ---- vLLM's tokenizer routes ---------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["", "/vllm"], ids=["root", "vllm-prefix"])
def test_tokenize_and_detokenize_round_trip(http: httpx.Client, prefix: str) -> None:
    text = "The capital of France is Paris."
    tokens = http.post(f"{prefix}/tokenize", json={"model": "mockserver-reference", "prompt": text}).json()
    assert tokens["tokens"] == Tokenizer.shipped().encode(text)
    assert tokens["count"] == len(tokens["tokens"]) and tokens["max_model_len"] == 8192
    back = http.post(f"{prefix}/detokenize", json={"model": "mockserver-reference", "tokens": tokens["tokens"]})
    assert back.json() == {"prompt": text}


def test_tokenize_a_chat_counts_what_chat_prompt_tokens_count(http: httpx.Client, client: openai.OpenAI) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    counted = http.post("/tokenize", json={"messages": messages, "return_token_strs": True}).json()
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=messages, max_tokens=2)  # type: ignore[arg-type]
    assert answer.usage is not None and counted["count"] == answer.usage.prompt_tokens
    assert counted["token_strs"][0] == "<|im_start|>"


def test_tokenizer_info_is_what_lm_eval_probes(http: httpx.Client) -> None:
    info = http.get("/vllm/tokenizer_info").json()
    eos = http.post("/vllm/tokenize", json={"prompt": info["eos_token"], "add_special_tokens": False}).json()
    assert eos["tokens"] == [Tokenizer.shipped().eos_id]
    assert "{% for message in messages %}" in info["chat_template"]


# ---- x-request-id ------------------------------------------------------------------------------


def test_every_answer_has_a_request_id_the_sdk_reads(client: openai.OpenAI, http: httpx.Client) -> None:
    answer = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
    )
    assert answer.request_id is not None and answer.request_id.startswith("req_")
    assert answer.parse()._request_id == answer.request_id
    with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}], max_tokens=4, stream=True
    ) as streamed:
        # Another body (stream: true), another id; there before the first byte of the stream.
        assert streamed.request_id is not None and streamed.request_id != answer.request_id
    for method, path in [
        ("GET", "/nowhere"),
        ("GET", "/health"),
        ("GET", "/__mockserver/journal"),
        ("POST", "/v1/models"),
    ]:
        assert http.request(method, path).headers["x-request-id"].startswith("req_"), path


def test_the_same_request_gets_the_same_id_and_another_another(http: httpx.Client) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    first, again = (http.post("/v1/chat/completions", json=body) for _ in range(2))
    other = http.post("/v1/chat/completions", json={**body, "max_tokens": 5})
    assert first.headers["x-request-id"] == again.headers["x-request-id"] != other.headers["x-request-id"]
    assert len(first.headers["x-request-id"]) == len("req_") + 32


# ---- determinism: same request, same bytes -----------------------------------------------------------

SAME: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/moderations", {"input": ["kill", "hello"]}),
    ("POST", "/v1/responses/compact", {"model": "gpt-4o-mini", "input": "Hi"}),
    ("DELETE", "/v1/models/ft:gpt-4o-mini:org:x:1", None),
    (
        "POST",
        f"/openai/deployments/d/chat/completions?api-version={API_VERSION}",
        {"messages": [{"role": "user", "content": "Hi"}]},
    ),
    ("POST", "/tokenize", {"prompt": "Hi"}),
    ("POST", "/detokenize", {"tokens": [5, 6]}),
    ("GET", "/tokenizer_info", None),
]


@pytest.mark.parametrize(("method", "path", "body"), SAME, ids=[f"{m} {p.split('?')[0]}" for m, p, _ in SAME])
def test_same_request_same_bytes(http: httpx.Client, method: str, path: str, body: dict[str, Any] | None) -> None:
    first, second = (http.request(method, path, json=body) for _ in range(2))
    assert first.status_code == 200, first.text
    assert (first.content, first.headers["x-request-id"]) == (second.content, second.headers["x-request-id"])


# ---- bad input: a 4xx envelope naming the parameter -----------------------------------------------------

BAD: list[tuple[str, str, Any, int, str]] = [
    ("POST", "/v1/moderations", {}, 400, "input"),
    ("POST", "/v1/moderations", {"input": 5}, 400, "input"),
    ("POST", "/v1/moderations", {"input": "x", "model": 3}, 400, "model"),
    ("POST", "/v1/moderations", {"input": [{"type": "text", "text": 1}]}, 400, "input[0].text"),
    ("POST", "/v1/moderations", {"input": [{"type": "video"}]}, 400, "input[0]"),
    ("POST", "/v1/responses/compact", {"input": "Hi"}, 400, "model"),
    ("POST", "/v1/responses/compact", {"model": "gpt-4o-mini", "input": []}, 400, "input"),
    (
        "POST",
        "/v1/responses/compact",
        {"model": "gpt-4o-mini", "previous_response_id": "resp_none"},
        404,
        "previous_response_id",
    ),
    ("DELETE", "/v1/models/gpt-4o", None, 404, "model"),
    ("POST", "/openai/deployments/d/chat/completions", {"messages": []}, 404, "api-version"),
    ("POST", f"/openai/deployments/d/chat/completions?api-version={API_VERSION}", {"messages": 1}, 400, "messages"),
    ("POST", "/tokenize", {}, 400, "prompt"),
    ("POST", "/tokenize", {"prompt": 7}, 400, "prompt"),
    ("POST", "/tokenize", {"messages": [{"content": "hi"}]}, 400, "messages[0].role"),
    ("POST", "/tokenize", {"prompt": "x", "return_token_strs": "yes"}, 400, "return_token_strs"),
    ("POST", "/detokenize", {}, 400, "tokens"),
    ("POST", "/detokenize", {"tokens": [1, -1]}, 400, "tokens[1]"),
    ("POST", "/vllm/detokenize", {"tokens": [10**9]}, 400, "tokens[0]"),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "param"), BAD, ids=[f"{p.split('?')[0]}:{param}" for _, p, _, _, param in BAD]
)
def test_bad_input_names_the_parameter(
    http: httpx.Client, method: str, path: str, body: Any, status: int, param: str
) -> None:
    answer = http.request(method, path, json=body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["param"] == param, error
    assert answer.headers["x-request-id"].startswith("req_")
    if not path.startswith("/vllm"):
        validate("ErrorResponse", answer.json())


def test_an_unexpected_500_carries_the_request_id_too() -> None:
    from starlette.requests import Request
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from mockserver.app import create_app
    from mockserver.config import Settings

    async def broken(request: Request) -> None:
        raise RuntimeError("a bug")

    app = create_app(Settings(backend="script"))
    app.router.routes.append(Route("/boom", broken, methods=["POST"]))
    with TestClient(app, raise_server_exceptions=False) as local:
        first, second = (local.post("/boom", content=b"same body") for _ in range(2))
    assert first.status_code == 500 and "a bug" not in first.text
    assert first.headers["x-request-id"] == second.headers["x-request-id"]
    assert first.headers["x-request-id"].startswith("req_")
