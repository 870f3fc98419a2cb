"""Raw wire bytes (not the SDK's parse of them) validate against OpenAI's OpenAPI schemas."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support.live import Live
from tests.support.spec import validate

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 6}
COMPLETION = {"model": "gpt-3.5-turbo-instruct", "prompt": "Hello there", "max_tokens": 6}


def _events(live: Live, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream("POST", live.base_url + path, json={**body, "stream": True}) as response:
        assert response.status_code == 200
        data = [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({}, id="plain"),
        pytest.param({"logprobs": True, "top_logprobs": 2, "n": 2}, id="logprobs-n2"),
        pytest.param({"stop": ["."], "seed": 3}, id="stop"),
    ],
)
def test_chat_body_and_chunks(live: Live, extra: dict[str, Any]) -> None:
    body = {**CHAT, **extra}
    validate("CreateChatCompletionResponse", httpx.post(live.base_url + "/chat/completions", json=body).json())
    for chunk in _events(live, "/chat/completions", {**body, "stream_options": {"include_usage": True}}):
        validate("CreateChatCompletionStreamResponse", chunk)


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({}, id="plain"),
        pytest.param({"logprobs": 2, "echo": True, "n": 2}, id="echo-logprobs"),
        pytest.param({"prompt": ["a", "b"], "stop": "\n"}, id="two-prompts"),
    ],
)
def test_completion_body_and_chunks(live: Live, extra: dict[str, Any]) -> None:
    body = {**COMPLETION, **extra}
    validate("CreateCompletionResponse", httpx.post(live.base_url + "/completions", json=body).json())
    for chunk in _events(live, "/completions", body):
        validate("CreateCompletionStreamResponse", chunk)


def test_models(live: Live) -> None:
    listing = httpx.get(live.base_url + "/models").json()
    validate("ListModelsResponse", listing)
    validate("Model", httpx.get(live.base_url + "/models/" + listing["data"][0]["id"]).json())


def test_errors(live: Live) -> None:
    response = httpx.post(live.base_url + "/completions", json={"model": "m"})
    assert response.status_code == 400
    validate("ErrorResponse", response.json())
