"""Bad input answers a 4xx in OpenAI's envelope naming the parameter; the server keeps serving."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import Live
from tests.support.spec import validate

CHAT = "/chat/completions"
COMP = "/completions"
MSG = [{"role": "user", "content": "hi"}]

CASES: list[Any] = [
    pytest.param(COMP, b"{not json", None, id="invalid-json"),
    pytest.param(COMP, b"[1, 2]", None, id="not-an-object"),
    pytest.param(COMP, {"prompt": "x"}, "model", id="missing-model"),
    pytest.param(COMP, {"model": "m"}, "prompt", id="missing-prompt"),
    pytest.param(CHAT, {"model": "m"}, "messages", id="missing-messages"),
    pytest.param(CHAT, {"model": "m", "messages": []}, "messages", id="empty-messages"),
    pytest.param(COMP, {"model": 5, "prompt": "x"}, "model", id="model-not-string"),
    pytest.param(COMP, {"model": "m", "prompt": 5}, "prompt", id="prompt-wrong-type"),
    pytest.param(COMP, {"model": "m", "prompt": []}, "prompt", id="prompt-empty-list"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "max_tokens": "5"}, "max_tokens", id="max-tokens-string"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "max_tokens": -1}, "max_tokens", id="max-tokens-negative"),
    pytest.param(CHAT, {"model": "m", "messages": MSG, "max_tokens": 0}, "max_tokens", id="chat-max-tokens-zero"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "temperature": 2.5}, "temperature", id="temperature-high"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "temperature": -0.1}, "temperature", id="temperature-low"),
    pytest.param(CHAT, {"model": "m", "messages": MSG, "temperature": "hot"}, "temperature", id="temperature-type"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "top_p": 1.5}, "top_p", id="top-p-high"),
    pytest.param(CHAT, {"model": "m", "messages": MSG, "top_p": -1}, "top_p", id="top-p-low"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "n": 0}, "n", id="n-zero"),
    pytest.param(CHAT, {"model": "m", "messages": MSG, "n": 129}, "n", id="n-too-many"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "n": 1.5}, "n", id="n-float"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "logprobs": 6}, "logprobs", id="logprobs-over-5"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "logprobs": -1}, "logprobs", id="logprobs-negative"),
    pytest.param(
        CHAT,
        {"model": "m", "messages": MSG, "logprobs": True, "top_logprobs": 21},
        "top_logprobs",
        id="top-logprobs-over-20",
    ),
    pytest.param(
        CHAT, {"model": "m", "messages": MSG, "top_logprobs": 2}, "top_logprobs", id="top-logprobs-without-logprobs"
    ),
    pytest.param(CHAT, {"model": "m", "messages": MSG, "logprobs": -1}, "logprobs", id="chat-logprobs-negative"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, "stop", id="five-stops"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "stop": 7}, "stop", id="stop-type"),
    pytest.param(COMP, {"model": "m", "prompt": [1, 99999]}, "prompt", id="token-out-of-vocab"),
    pytest.param(COMP, {"model": "m", "prompt": [[5], [-3]]}, "prompt[1]", id="token-negative"),
    pytest.param(COMP, {"model": "m", "prompt": [1, "a"]}, "prompt[0]", id="prompt-mixed-list"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "echo": "yes"}, "echo", id="echo-type"),
    pytest.param(COMP, {"model": "m", "prompt": "x", "seed": "1"}, "seed", id="seed-type"),
    pytest.param(
        COMP,
        {"model": "m", "prompt": "x", "stream_options": {"include_usage": True}},
        "stream_options",
        id="stream-options-without-stream",
    ),
    pytest.param(
        CHAT, {"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", id="bad-role"
    ),
    pytest.param(CHAT, {"model": "m", "messages": [{"content": "x"}]}, "messages[0].role", id="missing-role"),
    pytest.param(
        CHAT, {"model": "m", "messages": [{"role": "user", "content": 3}]}, "messages[0].content", id="content-type"
    ),
    # max_tokens alone cannot fit the window: it is the field to change (the issue: not "messages").
    pytest.param(COMP, {"model": "m", "prompt": "x", "max_tokens": 9000}, "max_tokens", id="context-length"),
    # JSON may escape half a surrogate pair; no tokenizer can encode it (was a 500 / a reset).
    pytest.param(COMP, b'{"model": "m", "prompt": "a\\ud800b"}', "prompt", id="lone-surrogate"),
    pytest.param(
        CHAT,
        b'{"model": "m", "messages": [{"role": "user", "content": "\\udfff"}]}',
        "messages",
        id="chat-lone-surrogate",
    ),
    pytest.param(
        CHAT,
        {"model": "m", "messages": [{"role": "user", "content": "word " * 9000}]},
        "messages",
        id="chat-context-length",
    ),
]


@pytest.mark.parametrize(("path", "body", "param"), CASES)
def test_bad_input_is_a_400_naming_the_parameter(live: Live, path: str, body: Any, param: str | None) -> None:
    kwargs = {"content": body} if isinstance(body, bytes) else {"json": body}
    response = httpx.post(live.base_url + path, headers={"content-type": "application/json"}, **kwargs)
    assert response.status_code == 400, response.text
    validate("ErrorResponse", response.json())
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert "Traceback" not in response.text
    # ...and the server is still serving.
    assert httpx.get(live.url + "/health").status_code == 200


def test_context_length_error_is_openais(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="m", prompt="hello", max_tokens=8192)
    body = caught.value.body
    assert isinstance(body, dict) and body["code"] == "context_length_exceeded"
    assert "maximum context length is 8192 tokens" in body["message"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/v1/nothing-here", 404), ("DELETE", "/v1/completions", 405), ("PUT", "/v1/chat/completions", 405)],
)
def test_routing_errors_use_the_envelope(live: Live, method: str, path: str, status: int) -> None:
    response = httpx.request(method, live.url + path)
    assert response.status_code == status
    validate("ErrorResponse", response.json())


def test_unknown_model_accepted_by_default(client: openai.OpenAI) -> None:
    done = client.chat.completions.create(model="some-model-nobody-listed", messages=MSG, max_tokens=2)  # type: ignore[arg-type]
    assert done.model == "some-model-nobody-listed"


def test_sdk_raises_typed_errors(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=MSG, temperature=9)  # type: ignore[arg-type]
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("not-a-listed-model")


async def _asgi(settings: Settings, method: str, path: str, **kwargs: Any) -> httpx.Response:
    app = create_app(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        return await c.request(method, path, **kwargs)


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        pytest.param({}, 401, "missing_api_key", id="missing"),
        pytest.param({"authorization": "Bearer wrong-key-123"}, 401, "invalid_api_key", id="wrong"),
        pytest.param({"authorization": "Basic sk-good"}, 401, "missing_api_key", id="not-bearer"),
        pytest.param({"authorization": "Bearer sk-good"}, 200, None, id="right"),
    ],
)
async def test_api_keys(headers: dict[str, str], status: int, code: str | None) -> None:
    response = await _asgi(Settings(api_keys=["sk-good"]), "GET", "/v1/models", headers=headers)
    assert response.status_code == status
    if code:
        validate("ErrorResponse", response.json())
        assert response.json()["error"]["code"] == code
        assert "wrong-key-123" not in response.text  # never echo a full key back


async def test_health_needs_no_key() -> None:
    assert (await _asgi(Settings(api_keys=["sk-good"]), "GET", "/health")).status_code == 200


async def test_any_bearer_accepted_without_configured_keys() -> None:
    response = await _asgi(Settings(), "GET", "/v1/models", headers={"authorization": "Bearer anything"})
    assert response.status_code == 200


async def test_unknown_model_rejected_when_configured() -> None:
    settings = Settings(reject_unknown_models=True)
    body = {"model": "nope", "messages": MSG}
    response = await _asgi(settings, "POST", "/v1/chat/completions", json=body)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "model_not_found"
    assert response.json()["error"]["param"] == "model"
    assert (await _asgi(settings, "GET", "/v1/models/nope")).status_code == 404
