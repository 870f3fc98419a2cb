"""Tests of ``tests/support/spec.py``: realistic bodies pass, broken ones fail at the right path.

The valid examples follow OpenAI's documented examples (API reference), so they double as
a record of the wire format the server must produce. Each invalid case changes one thing
in a valid example and names the JSON path the complaint must point at.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.spec import ENV_VAR, SYNTHETIC_COMPONENTS, component_names, errors, spec_path, validate

Body = dict[str, Any]
Key = str | int


def _with(body: Body, path: Sequence[Key], value: object) -> Body:
    """A copy of ``body`` with the value at ``path`` replaced (or added)."""
    changed = copy.deepcopy(body)
    parent: Any = changed
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return changed


def _without(body: Body, path: Sequence[Key]) -> Body:
    """A copy of ``body`` with the key at ``path`` removed."""
    changed = copy.deepcopy(body)
    parent: Any = changed
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return changed


# --- valid bodies ----------------------------------------------------------------------

USAGE: Body = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}

# POST /completions with echo=true, logprobs=1: the prompt's first token has no logprob,
# so the API puts null first in both token_logprobs and top_logprobs.
COMPLETION: Body = {
    "id": "cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7",
    "object": "text_completion",
    "created": 1589478378,
    "model": "gpt-3.5-turbo-instruct",
    "system_fingerprint": "fp_44709d6fcb",
    "choices": [
        {
            "text": "Say this is a test.",
            "index": 0,
            "logprobs": {
                "tokens": ["Say", " this", " is", " a", " test", "."],
                "token_logprobs": [None, -2.1045, -0.8372, -0.0351, -0.0019, -0.6123],
                "top_logprobs": [
                    None,
                    {" this": -2.1045},
                    {" is": -0.8372},
                    {" a": -0.0351},
                    {" test": -0.0019},
                    {".": -0.6123},
                ],
                "text_offset": [0, 3, 8, 11, 13, 18],
            },
            "finish_reason": "length",
        }
    ],
    "usage": USAGE,
}

COMPLETION_PLAIN: Body = _with(COMPLETION, ("choices", 0), {
    "text": "\n\nThis is indeed a test", "index": 0, "logprobs": None, "finish_reason": "stop",
})  # fmt: skip

# A stream chunk of /completions: finish_reason is null until the last chunk.
COMPLETION_CHUNK: Body = {
    "id": "cmpl-7iA7iJjj8V2zOkCGvWF2hAkDWBQZe",
    "object": "text_completion",
    "created": 1690759702,
    "model": "gpt-3.5-turbo-instruct",
    "choices": [{"text": " This", "index": 0, "logprobs": None, "finish_reason": None}],
}

CHAT: Body = {
    "id": "chatcmpl-123",
    "object": "chat.completion",
    "created": 1702685778,
    "model": "gpt-4o-mini",
    "system_fingerprint": "fp_44709d6fcb",
    "service_tier": "default",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello!", "refusal": None, "annotations": []},
            "logprobs": {
                "content": [
                    {
                        "token": "Hello",
                        "logprob": -0.31725305,
                        "bytes": [72, 101, 108, 108, 111],
                        "top_logprobs": [
                            {"token": "Hello", "logprob": -0.31725305, "bytes": [72, 101, 108, 108, 111]},
                            {"token": "Hi", "logprob": -1.3190403, "bytes": [72, 105]},
                        ],
                    },
                    {"token": "!", "logprob": -0.02380986, "bytes": [33], "top_logprobs": []},
                ],
                "refusal": None,
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 9,
        "completion_tokens": 2,
        "total_tokens": 11,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
}

CHAT_TOOL_CALL: Body = _with(CHAT, ("choices", 0), {
    "index": 0,
    "message": {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [{
            "id": "call_abc123",
            "type": "function",
            "function": {"name": "get_current_weather", "arguments": "{\"location\": \"Boston, MA\"}"},
        }],
    },
    "logprobs": None,
    "finish_reason": "tool_calls",
})  # fmt: skip

CHUNK: Body = {
    "id": "chatcmpl-123",
    "object": "chat.completion.chunk",
    "created": 1694268190,
    "model": "gpt-4o-mini",
    "system_fingerprint": "fp_44709d6fcb",
    "choices": [{"index": 0, "delta": {"content": "Hello"}, "logprobs": None, "finish_reason": None}],
}
CHUNK_FIRST: Body = _with(CHUNK, ("choices", 0, "delta"), {"role": "assistant", "content": "", "refusal": None})
CHUNK_LAST: Body = _with(CHUNK, ("choices", 0), {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"})
CHUNK_WITH_LOGPROBS: Body = _with(CHUNK, ("choices", 0, "logprobs"), {
    "content": [{"token": "Hello", "logprob": -0.31725305, "bytes": [72, 101, 108, 108, 111], "top_logprobs": []}],
    "refusal": None,
})  # fmt: skip
# stream_options.include_usage: every chunk carries "usage": null, then one last chunk
# with no choices carries the totals.
CHUNK_USAGE_NULL: Body = _with(CHUNK, ("usage",), None)
CHUNK_USAGE_ONLY: Body = _with(_with(CHUNK, ("choices",), []), ("usage",), USAGE)
CHUNK_TOOL_CALL: Body = _with(CHUNK, ("choices", 0, "delta"), {
    "tool_calls": [{
        "index": 0, "id": "call_abc123", "type": "function",
        "function": {"name": "get_current_weather", "arguments": ""},
    }],
})  # fmt: skip

MODEL: Body = {"id": "gpt-4o-mini", "object": "model", "created": 1686935002, "owned_by": "openai"}
MODELS: Body = {"object": "list", "data": [MODEL, {**MODEL, "id": "davinci-002", "owned_by": "system"}]}

ERROR: Body = {
    "error": {
        "message": "Invalid value for 'temperature': must be between 0 and 2.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "invalid_value",
    }
}
ERROR_NULLS: Body = {
    "error": {
        "message": "The model `gpt-5-turbo` does not exist",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}

RESPONSE: Body = {
    "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
    "object": "response",
    "created_at": 1741476542,
    "status": "completed",
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "max_output_tokens": None,
    "model": "gpt-4.1-2025-04-14",
    "output": [
        {
            "type": "message",
            "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "In a peaceful grove...", "annotations": [], "logprobs": []}],
        }
    ],
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "reasoning": {"effort": None, "summary": None},
    "store": True,
    "temperature": 1.0,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [],
    "top_p": 1.0,
    "truncation": "disabled",
    "usage": {
        "input_tokens": 36,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 87,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 123,
    },
    "metadata": {},
}
RESPONSE_IN_PROGRESS: Body = {**RESPONSE, "status": "in_progress", "output": [], "usage": None}
EVENT_CREATED: Body = {"type": "response.created", "sequence_number": 0, "response": RESPONSE_IN_PROGRESS}
EVENT_TEXT_DELTA: Body = {
    "type": "response.output_text.delta",
    "item_id": "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b",
    "output_index": 0,
    "content_index": 0,
    "delta": "In",
    "sequence_number": 4,
    "logprobs": [],
}

VALID: list[Any] = [
    pytest.param("CreateCompletionResponse", COMPLETION, id="completion-echo-logprobs"),
    pytest.param("CreateCompletionResponse", COMPLETION_PLAIN, id="completion-logprobs-null"),
    pytest.param("CreateCompletionStreamResponse", COMPLETION_CHUNK, id="completion-chunk"),
    pytest.param(
        "CreateCompletionStreamResponse",
        _with(COMPLETION_CHUNK, ("choices",), []) | {"usage": USAGE},
        id="completion-chunk-usage-only",
    ),
    pytest.param("CreateChatCompletionResponse", CHAT, id="chat-logprobs"),
    pytest.param("CreateChatCompletionResponse", CHAT_TOOL_CALL, id="chat-tool-call"),
    pytest.param("CreateChatCompletionStreamResponse", CHUNK, id="chunk"),
    pytest.param("CreateChatCompletionStreamResponse", CHUNK_FIRST, id="chunk-first-role"),
    pytest.param("CreateChatCompletionStreamResponse", CHUNK_LAST, id="chunk-last-finish"),
    pytest.param("CreateChatCompletionStreamResponse", CHUNK_WITH_LOGPROBS, id="chunk-logprobs"),
    pytest.param("CreateChatCompletionStreamResponse", CHUNK_USAGE_NULL, id="chunk-usage-null"),
    pytest.param("CreateChatCompletionStreamResponse", CHUNK_USAGE_ONLY, id="chunk-usage-only"),
    pytest.param("CreateChatCompletionStreamResponse", CHUNK_TOOL_CALL, id="chunk-tool-call"),
    pytest.param("ListModelsResponse", MODELS, id="models"),
    pytest.param("Model", MODEL, id="model"),
    pytest.param(
        "DeleteModelResponse",
        {"id": "ft:gpt-4o-mini:acme::abc123", "object": "model", "deleted": True},
        id="model-deleted",
    ),
    pytest.param("ErrorResponse", ERROR, id="error"),
    pytest.param("ErrorResponse", ERROR_NULLS, id="error-nulls"),
    pytest.param(
        "CreateEmbeddingResponse",
        {
            "object": "list",
            "data": [{"object": "embedding", "embedding": [0.0023064255, -0.009327292, -0.0028842222], "index": 0}],
            "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": 8, "total_tokens": 8},
        },
        id="embeddings",
    ),
    pytest.param("ImagesResponse", {"created": 1713833628, "data": [{"b64_json": "iVBORw0KGgo="}]}, id="images"),
    pytest.param("Response", RESPONSE, id="response"),
    pytest.param("Response", RESPONSE_IN_PROGRESS, id="response-in-progress"),
    pytest.param("ResponseStreamEvent", EVENT_CREATED, id="event-created"),
    pytest.param("ResponseStreamEvent", EVENT_TEXT_DELTA, id="event-text-delta"),
]


@pytest.mark.parametrize(("component", "body"), VALID)
def test_valid_bodies_pass(component: str, body: Body) -> None:
    validate(component, body)


# --- invalid bodies: one change each, and where the complaint must point ---------------

INVALID: list[Any] = [
    pytest.param("CreateCompletionResponse", _without(COMPLETION, ("choices",)), "$", "'choices' is a required",
                 id="completion-no-choices"),
    pytest.param("CreateCompletionResponse", _with(COMPLETION, ("choices", 0, "finish_reason"), "banana"),
                 "$.choices[0].finish_reason", "'banana' is not one of", id="completion-finish-banana"),
    pytest.param("CreateCompletionResponse", _with(COMPLETION, ("choices", 0, "finish_reason"), None),
                 "$.choices[0].finish_reason", "None is not of type", id="completion-finish-null"),
    pytest.param("CreateCompletionResponse", _without(COMPLETION, ("choices", 0, "logprobs")),
                 "$.choices[0]", "'logprobs' is a required", id="completion-no-logprobs-key"),
    pytest.param("CreateCompletionResponse",
                 _with(COMPLETION, ("choices", 0, "logprobs", "token_logprobs", 1), "-2.1"),
                 "$.choices[0].logprobs.token_logprobs[1]", "'-2.1' is not of type", id="completion-logprob-str"),
    pytest.param("CreateCompletionResponse", _with(COMPLETION, ("object",), "completion"),
                 "$.object", "is not one of ['text_completion']", id="completion-object"),
    pytest.param("CreateCompletionStreamResponse", _with(COMPLETION_CHUNK, ("choices", 0, "text"), None),
                 "$.choices[0].text", "None is not of type 'string'", id="completion-chunk-text-null"),
    pytest.param("CreateChatCompletionResponse", _with(CHAT, ("choices", 0, "finish_reason"), "banana"),
                 "$.choices[0].finish_reason", "'banana' is not one of", id="chat-finish-banana"),
    pytest.param("CreateChatCompletionResponse", _without(CHAT, ("choices", 0, "message", "refusal")),
                 "$.choices[0].message", "'refusal' is a required", id="chat-no-refusal-key"),
    pytest.param("CreateChatCompletionResponse", _without(CHAT, ("choices", 0, "logprobs")),
                 "$.choices[0]", "'logprobs' is a required", id="chat-no-logprobs-key"),
    pytest.param("CreateChatCompletionResponse",
                 _without(CHAT, ("choices", 0, "logprobs", "content", 0, "bytes")),
                 "$.choices[0].logprobs.content[0]", "'bytes' is a required", id="chat-logprob-no-bytes"),
    pytest.param("CreateChatCompletionResponse", _with(CHAT, ("created",), 1702685778.5),
                 "$.created", "is not of type 'integer'", id="chat-created-float"),
    pytest.param("CreateChatCompletionResponse", _with(CHAT, ("system_fingerprint",), None),
                 "$.system_fingerprint", "None is not of type 'string'", id="chat-fingerprint-null"),
    pytest.param("CreateChatCompletionResponse", _with(CHAT, ("service_tier",), "standard"),
                 "$.service_tier", "'standard' is not one of", id="chat-service-tier"),
    pytest.param("CreateChatCompletionResponse", _without(CHAT, ("usage", "total_tokens")),
                 "$.usage", "'total_tokens' is a required", id="chat-usage-no-total"),
    pytest.param("CreateChatCompletionStreamResponse", _without(CHUNK, ("choices", 0, "finish_reason")),
                 "$.choices[0]", "'finish_reason' is a required", id="chunk-no-finish-key"),
    pytest.param("CreateChatCompletionStreamResponse", _with(CHUNK, ("choices", 0, "finish_reason"), "banana"),
                 "$.choices[0].finish_reason", "'banana' is not one of", id="chunk-finish-banana"),
    pytest.param("CreateChatCompletionStreamResponse", _with(CHUNK, ("object",), "chat.completion"),
                 "$.object", "is not one of ['chat.completion.chunk']", id="chunk-object"),
    pytest.param("CreateChatCompletionStreamResponse", _with(CHUNK_USAGE_ONLY, ("usage",), {"prompt_tokens": 5}),
                 "$.usage", "'completion_tokens' is a required", id="chunk-usage-partial"),
    pytest.param("CreateChatCompletionStreamResponse", _with(CHUNK, ("choices", 0, "delta", "role"), "robot"),
                 "$.choices[0].delta.role", "'robot' is not one of", id="chunk-role"),
    pytest.param("ListModelsResponse", _with(MODELS, ("object",), "models"),
                 "$.object", "'models' is not one of ['list']", id="models-object"),
    pytest.param("ListModelsResponse", _without(MODELS, ("data", 1, "owned_by")),
                 "$.data[1]", "'owned_by' is a required", id="models-item-no-owner"),
    pytest.param("Model", _with(MODEL, ("created",), "2023-06-16"),
                 "$.created", "is not of type 'integer'", id="model-created-str"),
    pytest.param("ErrorResponse", _without(ERROR, ("error", "code")),
                 "$.error", "'code' is a required", id="error-no-code-key"),
    pytest.param("ErrorResponse", _with(ERROR, ("error", "type"), None),
                 "$.error.type", "None is not of type 'string'", id="error-type-null"),
    pytest.param("ErrorResponse", ERROR["error"], "$", "'error' is a required", id="error-not-enveloped"),
    pytest.param("Response", _without(RESPONSE, ("output", 0, "content", 0, "logprobs")),
                 "$.output[0].content[0]", "'logprobs' is a required", id="response-text-no-logprobs"),
    pytest.param("ResponseStreamEvent", _with(EVENT_TEXT_DELTA, ("delta",), 5),
                 "$.delta", "5 is not of type 'string'", id="event-delta-int"),
    pytest.param("ResponseStreamEvent", _with(EVENT_TEXT_DELTA, ("type",), "response.banana"),
                 "$", "type='response.banana' names none of the variants", id="event-type-unknown"),
]  # fmt: skip


@pytest.mark.parametrize(("component", "body", "path", "complaint"), INVALID)
def test_invalid_bodies_fail_at_the_right_path(component: str, body: Body, path: str, complaint: str) -> None:
    found = errors(component, body)
    assert any(error.startswith(f"{path}: ") and complaint in error for error in found), found


def test_validate_message_names_component_path_and_complaint() -> None:
    body = _with(CHAT, ("choices", 0, "finish_reason"), "banana")
    with pytest.raises(AssertionError) as raised:
        validate("CreateChatCompletionResponse", body)
    message = str(raised.value)
    assert "CreateChatCompletionResponse" in message
    assert "$.choices[0].finish_reason: 'banana' is not one of" in message


def test_long_complaints_are_shortened() -> None:
    body = _with(CHUNK, ("usage",), "x" * 5000)
    (complaint,) = errors("CreateChatCompletionStreamResponse", body)
    assert complaint.startswith("$.usage: ") and len(complaint) < 400


# --- how the document is read ------------------------------------------------------------

# The components the mock server's bodies are checked against: all must exist by these names.
SERVED = [
    "CreateCompletionResponse", "CreateChatCompletionResponse", "CreateChatCompletionStreamResponse",
    "ListModelsResponse", "Model", "DeleteModelResponse", "ErrorResponse", "CreateEmbeddingResponse",
    "ImagesResponse", "Response", "ResponseStreamEvent",
]  # fmt: skip


@pytest.mark.parametrize("component", SERVED)
def test_served_components_exist_in_the_document(component: str) -> None:
    assert component in component_names(errata=False)


def test_synthetic_components_are_ours_only() -> None:
    assert component_names() >= SYNTHETIC_COMPONENTS
    assert not SYNTHETIC_COMPONENTS & component_names(errata=False)


def test_unknown_component_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="CreateBananaResponse"):
        errors("CreateBananaResponse", {})


@pytest.mark.parametrize(
    ("component", "body"),
    [
        pytest.param("CreateChatCompletionStreamResponse", CHUNK, id="finish_reason-null"),
        pytest.param("CreateChatCompletionStreamResponse", CHUNK_USAGE_NULL, id="usage-null"),
        pytest.param("CreateChatCompletionStreamResponse", CHUNK_WITH_LOGPROBS, id="logprobs-refusal-null"),
    ],
)
def test_openapi_nullable_is_honoured_without_errata(component: str, body: Body) -> None:
    # These fields say `nullable: true` (OpenAPI 3.0) rather than `type: [..., "null"]`;
    # JSON Schema alone would reject their nulls, so this is reading the document, not an erratum.
    assert errors(component, body, errata=False) == []


@pytest.mark.parametrize(
    ("component", "body", "path"),
    [
        pytest.param("CreateCompletionResponse", COMPLETION, "$.choices[0].logprobs.token_logprobs[0]",
                     id="echo-null-token-logprob"),
        pytest.param("CreateCompletionResponse", COMPLETION, "$.choices[0].logprobs.top_logprobs[0]",
                     id="echo-null-top-logprobs"),
        pytest.param("Response", RESPONSE_IN_PROGRESS, "$.usage", id="response-usage-null"),
    ],
)  # fmt: skip
def test_errata_are_still_needed(component: str, body: Body, path: str) -> None:
    # If the document gets fixed upstream this fails: drop the erratum from spec.py then.
    assert any(error.startswith(f"{path}: ") for error in errors(component, body, errata=False))


def test_spec_path_default_and_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert spec_path() == Path(__file__).resolve().parents[1] / "support" / "openai-wire.json"  # in the repository
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "other.yaml"))
    assert spec_path() == tmp_path / "other.yaml"
