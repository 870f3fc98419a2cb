"""Google's Gemini API at the wire: ``generateContent`` and its siblings, as Google's JSON reads them.

Google's parser (proto3 JSON) takes every field in camelCase or in the proto's snake_case, and an
integer as a JSON number with no fraction (``topK: 1.0``, which google-genai sends) or as a
string of digits; so do these models (:class:`GeminiModel`, :data:`Integer`). Enum values are the
proto's names (``AUTO``, ``STOP``). What the caller wrote inside its own objects (function
``args``, a ``functionResponse``'s ``response``, JSON schemas) is kept as it came.

The model is named by the path (``models/{model}:generateContent``): the route puts it in the
body it reads (``model``), as Azure's deployment is, so the seed, the memo and the journal see it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from mockserver.schemas.common import GenerationFields, WireModel

__all__ = [
    "OPENAPI_BODY",
    "OPENAPI_RESPONSES",
    "BatchEmbedRequest",
    "Blob",
    "Content",
    "CountTokensRequest",
    "EmbedRequest",
    "FunctionCall",
    "FunctionDeclaration",
    "FunctionResponse",
    "GeminiModel",
    "GenerateRequest",
    "GenerationConfig",
    "Integer",
    "Part",
    "Tool",
    "ToolConfig",
]


def _integral(value: Any) -> Any:
    """An integer as Google's parser reads one: a whole float (``1.0``) or digits in a string."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


Integer = Annotated[int, BeforeValidator(_integral)]


class GeminiModel(WireModel):
    """camelCase or snake_case, as Google's JSON parser takes either."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True)


class Blob(GeminiModel):
    mime_type: str
    data: str  # base64


class FileData(GeminiModel):
    mime_type: str | None = None
    file_uri: str


class FunctionCall(GeminiModel):
    name: str
    args: dict[str, Any] | None = None
    id: str | None = None


class FunctionResponse(GeminiModel):
    name: str
    response: dict[str, Any] | None = None
    id: str | None = None


class Part(GeminiModel):
    text: str | None = None
    thought: bool | None = None
    thought_signature: str | None = None
    inline_data: Blob | None = None
    file_data: FileData | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None


class Content(GeminiModel):
    role: str | None = None  # checked by the codec, which names the content
    parts: list[Part] = Field(default_factory=list)


class ThinkingConfig(GeminiModel):
    include_thoughts: bool | None = None
    thinking_budget: Integer | None = None
    thinking_level: str | None = None


class GenerationConfig(GeminiModel):
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: Integer | None = Field(None, ge=1)
    candidate_count: Integer | None = Field(None, ge=1)
    max_output_tokens: Integer | None = Field(None, ge=1)
    stop_sequences: list[str] | None = Field(None, max_length=5)
    seed: Integer | None = None
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    response_mime_type: str | None = None
    response_schema: dict[str, Any] | None = None
    response_json_schema: dict[str, Any] | None = None
    response_logprobs: bool | None = None
    logprobs: Integer | None = Field(None, ge=0)
    thinking_config: ThinkingConfig | None = None
    response_modalities: list[str] | None = None


class FunctionDeclaration(GeminiModel):
    name: str = Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None  # Google's OpenAPI-style Schema (types in capitals)
    parameters_json_schema: dict[str, Any] | None = None  # a JSON Schema


class Tool(GeminiModel):
    function_declarations: list[FunctionDeclaration] | None = None


class FunctionCallingConfig(GeminiModel):
    mode: str | None = None  # AUTO, ANY, NONE, VALIDATED (checked by the codec)
    allowed_function_names: list[str] | None = None


class ToolConfig(GeminiModel):
    function_calling_config: FunctionCallingConfig | None = None


class GenerateRequest(GenerationFields, GeminiModel):
    """``GenerateContentRequest``. The OpenAI sampling fields of :class:`GenerationFields` stay
    unset (Gemini's are in ``generationConfig``); ``seed`` is the config's, for the handler."""

    contents: list[Content] = Field(min_length=1)
    system_instruction: Content | None = None
    generation_config: GenerationConfig | None = None
    tools: list[Tool] | None = None
    tool_config: ToolConfig | None = None
    safety_settings: list[dict[str, Any]] | None = None
    cached_content: str | None = None
    labels: dict[str, str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _seed_of_config(cls, data: Any) -> Any:
        """``generationConfig.seed`` as the request's ``seed`` (where the handler reads it); a
        bad one is named where it was sent, the deeper of the two errors."""
        if isinstance(data, dict):
            config = data.get("generationConfig", data.get("generation_config"))
            if isinstance(config, dict):
                seed = config.get("seed", config.get("seed"))
                data = {k: v for k, v in data.items() if k != "seed"}
                if seed is not None:
                    data["seed"] = _integral(seed)
        return data


class CountTokensRequest(GeminiModel):
    """``CountTokensRequest``: ``contents``, or a whole ``generateContentRequest``."""

    contents: list[Content] | None = None
    generate_content_request: dict[str, Any] | None = None


class EmbedRequest(GeminiModel):
    """``EmbedContentRequest`` (alone, or one of a batch: then ``model`` is ``models/…``)."""

    model: str | None = None
    content: Content
    task_type: str | None = None
    title: str | None = None
    output_dimensionality: Integer | None = Field(None, ge=1)


class BatchEmbedRequest(GeminiModel):
    requests: list[EmbedRequest] = Field(min_length=1)


Mode = Literal["AUTO", "ANY", "NONE", "VALIDATED"]


# ---- /openapi.json: Google's shapes, as mockserver's document describes them -------------------

_ERROR: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "status": {"type": "string"}},
            "required": ["code", "message", "status"],
        }
    },
    "required": ["error"],
}
_SSE: dict[str, Any] = {"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]}
# The body of every POST …/models/{model}:{method}: what generateContent reads (countTokens reads
# ``contents`` or ``generateContentRequest``, the embedding methods ``content`` or ``requests``).
OPENAPI_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "contents": {"type": "array", "items": {"type": "object"}},
                        "systemInstruction": {"type": "object"},
                        "generationConfig": {"type": "object"},
                        "tools": {"type": "array", "items": {"type": "object"}},
                        "toolConfig": {"type": "object"},
                        "content": {"type": "object"},
                        "requests": {"type": "array", "items": {"type": "object"}},
                    },
                }
            }
        },
    }
}
OPENAPI_RESPONSES: dict[str, Any] = {
    "200": {
        "description": "OK: a GenerateContentResponse (or countTokens', the embeddings'); streamed as server-sent "
        "events with ?alt=sse, else as one JSON array of chunks",
        "content": {"application/json": {"schema": {}}, "text/event-stream": {"schema": _SSE}},
    },
    **{
        str(status): {"description": "Error", "content": {"application/json": {"schema": _ERROR}}}
        for status in (400, 401, 404, 413, 429, 500, 503)
    },
}
