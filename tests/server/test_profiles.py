"""Provider profiles: each answers its documented example requests in its documented shape,
enforces its documented limits with its own error body, and one server speaks several
dialects at once under path prefixes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.profiles import PROFILES
from tests.support.live import FROZEN, Live, serve_in_thread
from tests.support.spec import validate

CHAT = [{"role": "user", "content": "Tell me about the sea."}]


@pytest.fixture(scope="module")
def strict() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, strict=True))) as server:
        yield server


def _post(live: Live, path: str, body: dict[str, Any], **kw: Any) -> httpx.Response:
    return httpx.post(live.url + path, json=body, timeout=60, **kw)


def _sse(live: Live, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    chunks = []
    with httpx.stream("POST", live.url + path, json={**body, "stream": True}, timeout=60) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunks.append(json.loads(line[6:]))
    return chunks


# ---- one server, several dialects ----------------------------------------------------------


def test_one_server_answers_as_openai_and_as_fireworks(live: Live) -> None:
    body = {"model": "m", "prompt": "The weather in Lisbon today is", "max_tokens": 20, "temperature": 0}
    text = _post(live, "/v1/completions", body).json()["choices"][0]["text"]
    stop = text[3:6]
    as_openai = _post(live, "/v1/completions", {**body, "stop": stop}).json()
    as_fireworks = _post(live, "/fireworks/v1/completions", {**body, "stop": stop}).json()
    # The same tokens, cut where each provider cuts: OpenAI drops the stop string, Fireworks keeps it.
    assert as_openai["choices"][0]["text"] == text[:3]
    assert as_fireworks["choices"][0]["text"] == text[:6]
    assert as_openai["system_fingerprint"] == "fp_mockserver" and "system_fingerprint" not in as_fireworks
    assert set(as_fireworks["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    validate("CreateCompletionResponse", as_openai)
    # ... and each its own limits and error body
    over = {**body, "top_k": 101}
    assert _post(live, "/v1/completions", over).status_code == 200
    error = _post(live, "/fireworks/v1/completions", over)
    assert error.status_code == 400
    assert error.json() == {
        "error": {
            "object": "error",
            "type": "invalid_request_error",
            "message": "Invalid value for 'top_k': must be less than or equal to 100.",
        }
    }


def test_the_sdk_works_under_a_prefix(live: Live) -> None:
    with openai.OpenAI(base_url=live.url + "/together/v1", api_key="k", max_retries=0) as client:
        done = client.chat.completions.create(model="m", messages=CHAT, seed=1)  # type: ignore[arg-type]
        assert done.choices[0].finish_reason == "eos"  # Together's word for a model that ended itself
        ids = [m.id for m in client.models.list()]
        assert "meta-llama/Llama-3.3-70B-Instruct-Turbo" in ids


def test_server_profile_answers_unprefixed_paths() -> None:
    app = create_app(Settings(frozen_time=FROZEN, profile="fireworks"))
    with serve_in_thread(app) as live:
        done = _post(live, "/v1/chat/completions", {"model": "m", "messages": CHAT, "seed": 1}).json()
        assert "system_fingerprint" not in done and "prompt_tokens_details" not in done["usage"]
        assert _post(live, "/openai/v1/chat/completions", {"model": "m", "messages": CHAT}).json()[
            "system_fingerprint"
        ] == ("fp_mockserver")
        ids = [m["id"] for m in httpx.get(live.url + "/v1/models").json()["data"]]
        assert ids[0].startswith("accounts/fireworks/models/")


def test_unknown_prefix_is_a_404(live: Live) -> None:
    response = _post(live, "/acme/v1/completions", {"model": "m", "prompt": "x"})
    assert response.status_code == 404 and "error" in response.json()


def test_models_per_profile_and_the_override(live: Live) -> None:
    def ids(prefix: str) -> list[str]:
        return [m["id"] for m in httpx.get(live.url + prefix + "/v1/models").json()["data"]]

    assert "openai/gpt-3.5-turbo-instruct" in ids("/tokenhub")
    assert "Qwen/Qwen3-30B-A3B-Instruct-2507" in ids("/nebul")
    assert "gpt-4o-mini" in ids("")
    model = httpx.get(live.url + "/tokenhub/v1/models/openai/gpt-3.5-turbo-instruct")
    assert model.status_code == 200 and model.json()["owned_by"] == "openai"
    assert httpx.get(live.url + "/tokenhub/v1/models/gpt-4o").status_code == 404


async def test_reject_unknown_models_uses_the_prefixs_list() -> None:
    app = create_app(Settings(reject_unknown_models=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        body = {"model": "openai/gpt-3.5-turbo-instruct", "prompt": "x", "max_tokens": 1}
        assert (await c.post("/v1/completions", json=body)).status_code == 404
        assert (await c.post("/tokenhub/v1/completions", json=body)).status_code == 200


async def test_errors_and_auth_in_the_profiles_style() -> None:
    app = create_app(Settings(api_keys=["sk-good"]))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        unauthorised = await c.get("/vllm/v1/models")
        assert unauthorised.status_code == 401
        assert unauthorised.json()["error"]["type"] == "AuthenticationError"
        assert unauthorised.json()["error"]["code"] == 401
        missing = await c.get("/fireworks/v1/nowhere", headers={"authorization": "Bearer sk-good"})
        assert missing.status_code == 404 and missing.json()["error"]["object"] == "error"


# ---- the providers' documented examples ----------------------------------------------------


def test_nebius_documented_example(live: Live) -> None:
    body = {
        "model": "meta-llama/Llama-3.3-70B-Instruct",
        "prompt": "Say this is a test",
        "stream": False,
        "stream_options": None,
        "max_tokens": 100,
        "temperature": 1,
        "top_p": 1,
        "n": 1,
        "logprobs": None,
        "echo": False,
        "stop": "<string>",
        "presence_penalty": 0,
        "frequency_penalty": 0,
        "logit_bias": {},
        "user": "<string>",
        "extra_body": None,
        "service_tier": "auto",
    }
    response = _post(live, "/nebius/v1/completions", body, params={"ai_project_id": "project-e00abc"})
    assert response.status_code == 200, response.text
    done = response.json()
    assert set(done) == {"id", "object", "created", "model", "choices", "usage", "service_tier"}
    assert done["object"] == "text_completion" and done["service_tier"] == "auto"
    assert done["choices"][0]["finish_reason"] == "stop"
    assert set(done["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    unasked = _post(live, "/nebius/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 2}).json()
    assert unasked["service_tier"] == "auto"  # a required field of its response
    for tier in ("over-limit", "no-limit", "flex"):
        assert _post(live, "/nebius/v1/completions", {**body, "service_tier": tier}).json()["service_tier"] == tier
    bad = _post(live, "/nebius/v1/completions", {**body, "service_tier": "priority"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "service_tier"


def test_nebius_literal_extra_body_is_lifted(live: Live) -> None:
    body = {"model": "m", "prompt": "The sea", "max_tokens": 8, "temperature": 0}
    inline = _post(live, "/nebius/v1/completions", {**body, "top_k": 1, "logit_bias": {"300": 5}}).json()
    nested = _post(live, "/nebius/v1/completions", {**body, "extra_body": {"top_k": 1, "logit_bias": {"300": 5}}})
    assert nested.json()["choices"] == inline["choices"]
    clash = _post(live, "/nebius/v1/completions", {**body, "top_k": 2, "extra_body": {"top_k": 1}})
    assert clash.status_code == 400 and clash.json()["error"]["param"] == "extra_body.top_k"


def test_nebul_documented_example(live: Live) -> None:
    body = {"model": "Qwen/Qwen3-30B-A3B-Instruct-2507", "prompt": "The capital of France is", "max_tokens": 10}
    done = _post(live, "/nebul/v1/completions", {**body, "temperature": 0.7}).json()
    assert done["object"] == "text_completion" and done["model"] == body["model"]
    choice = done["choices"][0]
    assert {"text", "index", "logprobs", "finish_reason"} <= set(choice) and choice["logprobs"] is None
    assert done["choices"][0]["finish_reason"] == "length" and done["usage"]["completion_tokens"] == 10
    default = _post(live, "/nebul/v1/completions", {"model": body["model"], "prompt": "Once upon", "temperature": 0})
    assert default.json()["usage"]["completion_tokens"] == 16  # documented default max_tokens
    insert = _post(live, "/nebul/v1/completions", {**body, "suffix": " is a city.", "best_of": 2, "seed": 1})
    assert insert.status_code == 200 and len(insert.json()["choices"]) == 1


def test_nebulablock_documented_examples(live: Live) -> None:
    body = {
        "messages": [{"role": "user", "content": "insert your prompt here"}],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "max_tokens": None,
        "temperature": 1,
        "top_p": 0.9,
    }
    done = _post(live, "/nebulablock/v1/chat/completions", {**body, "stream": False}).json()
    assert done["object"] == "chat.completion"
    for field in ("system_fingerprint", "service_tier", "prompt_logprobs"):
        assert field in done and done[field] is None
    assert done["usage"]["completion_tokens_details"] is None and done["usage"]["prompt_tokens_details"] is None
    assert done["choices"][0]["message"]["role"] == "assistant"
    chunks = _sse(live, "/nebulablock/v1/chat/completions", body)
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == done["choices"][0]["message"]["content"]


def test_tokenhub_documented_example(live: Live) -> None:
    body = {
        "model": "openai/gpt-3.5-turbo-instruct",
        "prompt": "The tallest mountain in the world is",
        "max_tokens": 64,
        "temperature": 0.5,
    }
    done = _post(live, "/tokenhub/v1/completions", body).json()
    assert done["object"] == "text_completion" and done["model"] == "openai/gpt-3.5-turbo-instruct"
    assert done["usage"]["total_tokens"] == done["usage"]["prompt_tokens"] + done["usage"]["completion_tokens"]
    best = _post(live, "/tokenhub/v1/completions", {**body, "best_of": 3, "logprobs": 5, "seed": 4})
    assert best.status_code == 200 and len(best.json()["choices"]) == 1


def test_fireworks_documented_parameters(live: Live) -> None:
    body = {
        "model": "accounts/fireworks/models/llama-v3p1-8b-instruct",
        "prompt": "The weather in Lisbon today is",
        "context_length_exceeded_behavior": "error",
        "echo": True,
        "frequency_penalty": 0.5,
        "presence_penalty": 0.5,
        "repetition_penalty": 1.2,
        "ignore_eos": True,
        "logprobs": 5,
        "max_tokens": 24,
        "mirostat_target": 2.0,
        "mirostat_lr": 0.2,
        "n": 2,
        "stop": ["\n\n"],
        "temperature": 0.9,
        "top_k": 50,
        "top_p": 0.95,
        "user": "u-1",
        "seed": 3,
    }
    done = _post(live, "/fireworks/v1/completions", body).json()
    assert len(done["choices"]) == 2
    for choice in done["choices"]:
        assert choice["text"].startswith(body["prompt"])  # echo
        assert all(len(top) <= 6 for top in choice["logprobs"]["top_logprobs"][1:])
    chunks = _sse(live, "/fireworks/v1/completions", {**body, "echo": False})
    assert all("usage" not in c for c in chunks[:-1])
    assert chunks[-1]["usage"]["completion_tokens"] > 0  # usage rides on the last chunk, unasked
    assert chunks[-1]["choices"][0]["finish_reason"] is not None
    chat = _post(live, "/fireworks/v1/chat/completions", {"model": "m", "messages": CHAT, "logprobs": 2}).json()
    legacy = chat["choices"][0]["logprobs"]
    assert set(legacy) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}  # an integer: legacy format


def test_together_stream_and_legacy_chat_logprobs(live: Live) -> None:
    body = {"model": "m", "messages": CHAT, "seed": 1, "logprobs": 1}
    done = _post(live, "/together/v1/chat/completions", body).json()
    assert done["choices"][0]["finish_reason"] == "eos"
    assert len(done["choices"][0]["logprobs"]["tokens"]) == done["usage"]["completion_tokens"]
    chunks = _sse(live, "/together/v1/chat/completions", {**body, "logprobs": None})
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "eos" and chunks[-1]["usage"] is not None


def test_vllm_extras(live: Live) -> None:
    body = {"model": "m", "prompt": "The sea", "max_tokens": 6, "temperature": 0, "prompt_logprobs": 1}
    done = _post(live, "/vllm/v1/completions", body).json()
    choice = done["choices"][0]
    assert "stop_reason" in choice and choice["prompt_logprobs"][0] is None
    over = _post(live, "/vllm/v1/completions", {**body, "prompt_logprobs": 21})
    assert over.status_code == 400
    assert over.json() == {
        "error": {
            "message": "Invalid value for 'prompt_logprobs': must be less than or equal to 20.",
            "type": "BadRequestError",
            "param": "prompt_logprobs",
            "code": 400,
        }
    }


# ---- documented limits ---------------------------------------------------------------------

LIMITS: list[Any] = [
    pytest.param("", "completions", {"logprobs": 6}, "logprobs", id="openai-logprobs"),
    pytest.param("", "completions", {"best_of": 21}, "best_of", id="openai-best-of"),
    pytest.param("", "chat", {"logprobs": True, "top_logprobs": 21}, "top_logprobs", id="openai-top-logprobs"),
    pytest.param("", "chat", {"service_tier": "no-limit"}, "service_tier", id="openai-service-tier"),
    pytest.param("/fireworks", "completions", {"logprobs": 6}, "logprobs", id="fireworks-logprobs"),
    pytest.param("/fireworks", "chat", {"logprobs": True, "top_logprobs": 6}, "top_logprobs", id="fireworks-top"),
    pytest.param("/fireworks", "chat", {"top_k": 101}, "top_k", id="fireworks-top-k"),
    pytest.param("/fireworks", "completions", {"repetition_penalty": 2.5}, "repetition_penalty", id="fw-rep"),
    pytest.param("/together", "completions", {"logprobs": 21}, "logprobs", id="together-logprobs"),
    pytest.param("/nebius", "completions", {"logprobs": 21}, "logprobs", id="nebius-logprobs"),
    pytest.param("/nebul", "chat", {"logprobs": True, "top_logprobs": 21}, "top_logprobs", id="nebul-top"),
    pytest.param("/nebulablock", "completions", {"n": 129}, "n", id="nebulablock-n"),
    pytest.param("/tokenhub", "completions", {"logprobs": 6}, "logprobs", id="tokenhub-logprobs"),
    pytest.param("/vllm", "completions", {"logprobs": 21}, "logprobs", id="vllm-logprobs"),
]


@pytest.mark.parametrize(("prefix", "endpoint", "extra", "param"), LIMITS)
def test_documented_limits_are_400s_in_the_profiles_envelope(
    live: Live, prefix: str, endpoint: str, extra: dict[str, Any], param: str
) -> None:
    profile = PROFILES[prefix.strip("/") or "openai"]
    path = f"{prefix}/v1/completions" if endpoint == "completions" else f"{prefix}/v1/chat/completions"
    base: dict[str, Any] = {"model": "m", "prompt": "x"} if endpoint == "completions" else {"model": "m"}
    if endpoint == "chat":
        base["messages"] = CHAT
    response = _post(live, path, {**base, **extra, "max_tokens": 2})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert param in error["message"]
    if profile.error_style == "openai":
        validate("ErrorResponse", response.json())
        assert error["param"] == param and error["type"] == "invalid_request_error"
    elif profile.error_style == "vllm":
        assert error["param"] == param and error["code"] == 400 and error["type"] == "BadRequestError"
    else:
        assert set(error) == {"object", "type", "message"}
    within = {k: (v - 1 if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in extra.items()}
    if "service_tier" not in extra and "repetition_penalty" not in extra:
        assert _post(live, path, {**base, **within, "max_tokens": 2}).status_code == 200


# ---- --strict ------------------------------------------------------------------------------


def test_strict_openai_rejects_what_openai_does_not_document(strict: Live) -> None:
    body = {"model": "m", "prompt": "x", "max_tokens": 2}
    one = _post(strict, "/v1/completions", {**body, "top_k": 5})
    assert one.status_code == 400
    assert one.json() == {
        "error": {
            "message": "Unrecognized request argument supplied: top_k",
            "type": "invalid_request_error",
            "param": "top_k",
            "code": None,
        }
    }
    two = _post(strict, "/v1/completions", {**body, "top_k": 5, "min_p": 0.1})
    assert two.json()["error"]["message"] == "Unrecognized request arguments supplied: min_p, top_k"
    chat_int = _post(strict, "/v1/chat/completions", {"model": "m", "messages": CHAT, "logprobs": 2})
    assert chat_int.status_code == 400 and chat_int.json()["error"]["param"] == "logprobs"
    assert _post(strict, "/v1/completions", {**body, "best_of": 2, "seed": 1}).status_code == 200


def test_strict_lenient_providers_ignore_what_they_do_not_document(strict: Live, live: Live) -> None:
    body = {"model": "m", "prompt": "The weather in Lisbon today is", "max_tokens": 10, "temperature": 0}
    plain = _post(strict, "/fireworks/v1/completions", body).json()
    # Fireworks documents no suffix: under --strict it is dropped before it can change anything.
    insert = {**body, "suffix": " and rain.", "whatever": 1}
    dropped = _post(strict, "/fireworks/v1/completions", insert).json()
    assert dropped["choices"] == plain["choices"] and dropped["usage"] == plain["usage"]
    # Without --strict the same request honours the suffix.
    honoured = _post(live, "/fireworks/v1/completions", insert).json()
    assert honoured["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"]


def test_lenient_default_honours_every_extension(client: openai.OpenAI) -> None:
    done = client.completions.create(
        model="m",
        prompt="The sea",
        max_tokens=8,
        temperature=0,
        extra_body={"top_k": 1, "min_p": 0.1, "repetition_penalty": 1.1, "ignore_eos": True, "whatever": 1},
    )
    assert done.usage is not None and done.usage.completion_tokens == 8
