"""What the server answers, as pydantic models: the source of ``/openapi.json``'s response
schemas (:mod:`mockserver.routes.openapi`).

The codecs build their bodies as plain dicts (fast, and shaped by the profile); these models
describe those bodies for clients and fuzzers, and the schemathesis run in the test suite
holds every real answer to them, so they cannot drift unnoticed. Extra fields are allowed
everywhere: providers add their own (``stop_reason``, ``reasoning_content``, …).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionDeleted",
    "ChatCompletionList",
    "ChatMessageList",
    "Completion",
    "EmbeddingList",
    "ErrorResponse",
    "ImagesResponse",
    "InputItemList",
    "InputTokens",
    "Model",
    "ModelList",
    "ResponseDeleted",
    "ResponseObject",
    "ResponseStreamEvent",
]

Finish = Literal["stop", "length", "tool_calls", "content_filter", "function_call"] | None


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorBody(_Out):
    message: str
    type: str | None = None


class ErrorResponse(_Out):
    """OpenAI's envelope (vLLM's and Fireworks' styles fit it too)."""

    error: ErrorBody


class UsageBody(_Out):
    prompt_tokens: int
    completion_tokens: int = 0
    total_tokens: int
    prompt_tokens_details: dict[str, Any] | None = None
    completion_tokens_details: dict[str, Any] | None = None


class TopLogprob(_Out):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatLogprobs(_Out):
    content: list[TokenLogprob] | None
    refusal: list[TokenLogprob] | None = None


class LegacyLogprobs(_Out):
    """Completions' logprobs (also chat's on profiles that answer an integer ``logprobs`` so)."""

    tokens: list[str]
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float] | None] | None
    text_offset: list[int]


class FunctionCall(_Out):
    name: str
    arguments: str


class ToolCallBody(_Out):
    id: str
    type: Literal["function"]
    function: FunctionCall


class AssistantMessage(_Out):
    role: Literal["assistant"]
    content: str | None
    refusal: str | None = None
    tool_calls: list[ToolCallBody] | None = None
    function_call: FunctionCall | None = None


class ChatChoice(_Out):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | LegacyLogprobs | None
    finish_reason: Finish


class ChatCompletion(_Out):
    id: str
    object: str  # "chat.completion" (a profile may name it otherwise)
    created: int
    model: str
    choices: list[ChatChoice]
    usage: UsageBody | None = None


class ToolCallChunk(_Out):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: dict[str, str] | None = None


class Delta(_Out):
    role: Literal["assistant"] | None = None
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCallChunk] | None = None
    function_call: dict[str, str] | None = None


class ChunkChoice(_Out):
    index: int
    delta: Delta
    logprobs: ChatLogprobs | LegacyLogprobs | None = None
    finish_reason: Finish


class ChatCompletionChunk(_Out):
    """One ``data:`` frame of a chat stream (the stream ends with ``data: [DONE]``)."""

    id: str
    object: str
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: UsageBody | None = None


class CompletionChoice(_Out):
    text: str
    index: int
    logprobs: LegacyLogprobs | None
    finish_reason: Finish


class Completion(_Out):
    """A legacy completion, and (with ``finish_reason`` null until the last) each stream frame."""

    id: str
    object: str
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: UsageBody | None = None


class Model(_Out):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(_Out):
    object: Literal["list"]
    data: list[Model]


class ResponseObject(_Out):
    """A Response: its output items are ``reasoning``, ``message`` and ``function_call``."""

    id: str
    object: Literal["response"]
    created_at: int
    status: Literal["queued", "in_progress", "completed", "failed", "cancelled", "incomplete"]
    model: str
    output: list[dict[str, Any]]
    usage: dict[str, Any] | None
    error: dict[str, Any] | None
    incomplete_details: dict[str, Any] | None


class ResponseStreamEvent(_Out):
    """One event of a Responses stream (``event: <type>`` then ``data: {…}``)."""

    type: str
    sequence_number: int


class ResponseDeleted(_Out):
    id: str
    object: Literal["response"]
    deleted: bool


class _Page(_Out):
    object: Literal["list"]
    data: list[dict[str, Any]]
    first_id: str | None
    last_id: str | None
    has_more: bool


class InputItemList(_Page):
    pass


class InputTokens(_Out):
    object: Literal["response.input_tokens"]
    input_tokens: int


class ChatCompletionList(_Page):
    pass


class ChatMessageList(_Page):
    pass


class ChatCompletionDeleted(_Out):
    id: str
    object: Literal["chat.completion.deleted"]
    deleted: bool


class Embedding(_Out):
    object: Literal["embedding"]
    index: int
    embedding: list[float] | str  # a string with encoding_format "base64" (little-endian float32)


class EmbeddingUsage(_Out):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(_Out):
    object: Literal["list"]
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage


class GeneratedImage(_Out):
    url: str | None = None
    b64_json: str | None = None
    revised_prompt: str | None = None


class ImagesResponse(_Out):
    created: int
    data: list[GeneratedImage]
    usage: dict[str, Any] | None = None
