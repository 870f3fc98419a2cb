"""``GET /openapi.json``: our own surface as OpenAPI 3.1, generated from the pydantic models.

Request bodies are the very models the handlers validate with (:mod:`mockserver.schemas`);
response bodies are :mod:`mockserver.schemas.outputs`. The one thing written here is the
table of operations — method, path, summary, which model goes in and which comes out — and a
test holds it to the route table, so an endpoint cannot go undocumented. Streams are
documented as ``text/event-stream`` whose frames are the named model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from mockserver.routes.gemini import endpoints as gemini_routes
from mockserver.routes.responses.compact import CompactRequest
from mockserver.schemas import anthropic, audio, gemini, outputs
from mockserver.schemas.chat import ChatRequest
from mockserver.schemas.completions import CompletionRequest
from mockserver.schemas.conversations import CreateConversation, CreateItems, UpdateConversation
from mockserver.schemas.embeddings import EmbeddingRequest
from mockserver.schemas.images import EditRequest, ImageRequest, VariationRequest
from mockserver.schemas.responses import InputTokensRequest, ResponsesRequest
from mockserver.wire.json import Json

__all__ = ["OPERATIONS", "Operation", "Param", "document"]

Method = Literal["get", "post", "delete"]


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    where: Literal["path", "query"]
    schema: Json
    description: str = ""


@dataclass(frozen=True, slots=True)
class Operation:
    method: Method
    path: str  # OpenAPI style: /v1/models/{model}
    summary: str
    tag: str
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None  # None: described by ``raw`` (or no body schema)
    stream: type[BaseModel] | None = None  # the body of each SSE frame, when it can stream
    params: tuple[Param, ...] = ()
    raw: tuple[str, Json] | None = None  # (media type, schema) of a non-JSON answer
    multipart: Json | None = None  # a multipart/form-data request body's schema
    errors: tuple[int, ...] = (400, 401, 404, 429, 500)
    extra: Json = field(default_factory=dict)


def _id(name: str) -> Param:
    return Param(name, "path", {"type": "string"})


def _form(model: type[BaseModel], files: tuple[str, ...], required: tuple[str, ...]) -> Json:
    """A multipart body: the model's fields as form fields, and the uploaded files."""
    schema = model.model_json_schema()
    properties: Json = {k: v for k, v in schema.get("properties", {}).items() if "$ref" not in str(v)}
    for name in files:
        properties[name] = {"type": "string", "format": "binary"}
    return {"type": "object", "properties": properties, "required": list(required)}


_OBJECT: Json = {"type": "object"}


def _body(properties: Json, required: tuple[str, ...] = ()) -> Json:
    """A JSON request body given by its schema here (the route reads it without a model)."""
    schema = {"type": "object", "properties": properties, "required": list(required)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


_GEMINI_POST: Json = {**gemini.OPENAPI_BODY, "responses": gemini.OPENAPI_RESPONSES}

_PAGE = (
    Param("after", "query", {"type": "string"}, "Continue after this id."),
    Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": 100}),
    Param("order", "query", {"type": "string", "enum": ["asc", "desc"]}),
)

# OpenAI's platform: files, uploads, batches (docs/batches.md); bodies as the routes read them.
_FILE_FORM: Json = {
    "type": "object",
    "properties": {"file": {"type": "string", "format": "binary"}, "purpose": {"type": "string"}},
    "required": ["file", "purpose"],
}
_PLATFORM = (
    Operation("post", "/v1/files", "Upload a file", "files", raw=("application/json", _OBJECT), multipart=_FILE_FORM),
    Operation("get", "/v1/files", "List files", "files", raw=("application/json", _OBJECT),
              params=(Param("purpose", "query", {"type": "string"}), *_PAGE[:1],
                      Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": 10000}), _PAGE[2])),
    Operation("get", "/v1/files/{file_id}", "Retrieve a file", "files", raw=("application/json", _OBJECT),
              params=(_id("file_id"),)),
    Operation("delete", "/v1/files/{file_id}", "Delete a file", "files", raw=("application/json", _OBJECT),
              params=(_id("file_id"),)),
    Operation("get", "/v1/files/{file_id}/content", "A file's exact bytes", "files",
              raw=("application/octet-stream", {"type": "string", "format": "binary"}), params=(_id("file_id"),)),
    Operation("post", "/v1/uploads", "Create an upload", "uploads", raw=("application/json", _OBJECT),
              extra=_body({"filename": {"type": "string"}, "purpose": {"type": "string"},
                           "bytes": {"type": "integer"}, "mime_type": {"type": "string"}},
                          ("filename", "purpose", "bytes", "mime_type"))),
    Operation("post", "/v1/uploads/{upload_id}/parts", "Add a part to an upload", "uploads",
              raw=("application/json", _OBJECT), params=(_id("upload_id"),),
              multipart={"type": "object", "properties": {"data": {"type": "string", "format": "binary"}},
                         "required": ["data"]}),
    Operation("post", "/v1/uploads/{upload_id}/complete", "Complete an upload into a file", "uploads",
              raw=("application/json", _OBJECT), params=(_id("upload_id"),),
              extra=_body({"part_ids": {"type": "array", "items": {"type": "string"}}, "md5": {"type": "string"}},
                          ("part_ids",))),
    Operation("post", "/v1/uploads/{upload_id}/cancel", "Cancel an upload", "uploads",
              raw=("application/json", _OBJECT), params=(_id("upload_id"),)),
    Operation("post", "/v1/batches", "Create a batch", "batches", raw=("application/json", _OBJECT),
              extra=_body({"input_file_id": {"type": "string"}, "endpoint": {"type": "string"},
                           "completion_window": {"type": "string"}, "metadata": {"type": "object"}},
                          ("input_file_id", "endpoint", "completion_window"))),
    Operation("get", "/v1/batches", "List batches", "batches", raw=("application/json", _OBJECT),
              params=_PAGE[:2]),
    Operation("get", "/v1/batches/{batch_id}", "Retrieve a batch", "batches", raw=("application/json", _OBJECT),
              params=(_id("batch_id"),)),
    Operation("post", "/v1/batches/{batch_id}/cancel", "Cancel a batch (409 once it has finished)", "batches",
              raw=("application/json", _OBJECT), params=(_id("batch_id"),), errors=(400, 401, 404, 409, 429, 500)),
)  # fmt: skip

# The Responses API's conversations (docs/responses.md#conversations).
_ITEMS_PATH = "/v1/conversations/{conversation_id}/items"
_CONVERSATIONS = (
    Operation("post", "/v1/conversations", "Create a conversation", "conversations", CreateConversation,
              raw=("application/json", _OBJECT)),
    Operation("get", "/v1/conversations/{conversation_id}", "Retrieve a conversation", "conversations",
              raw=("application/json", _OBJECT), params=(_id("conversation_id"),)),
    Operation("post", "/v1/conversations/{conversation_id}", "Update a conversation's metadata", "conversations",
              UpdateConversation, raw=("application/json", _OBJECT), params=(_id("conversation_id"),)),
    Operation("delete", "/v1/conversations/{conversation_id}", "Delete a conversation", "conversations",
              raw=("application/json", _OBJECT), params=(_id("conversation_id"),)),
    Operation("post", _ITEMS_PATH, "Add items to a conversation", "conversations", CreateItems,
              raw=("application/json", _OBJECT), params=(_id("conversation_id"),)),
    Operation("get", _ITEMS_PATH, "List a conversation's items", "conversations",
              raw=("application/json", _OBJECT), params=(_id("conversation_id"), *_PAGE)),
    Operation("get", _ITEMS_PATH + "/{item_id}", "Retrieve a conversation's item", "conversations",
              raw=("application/json", _OBJECT), params=(_id("conversation_id"), _id("item_id"))),
    Operation("delete", _ITEMS_PATH + "/{item_id}", "Delete a conversation's item", "conversations",
              raw=("application/json", _OBJECT), params=(_id("conversation_id"), _id("item_id"))),
)  # fmt: skip

# Voice (docs/voice.md); the Realtime API is a WebSocket (/v1/realtime), outside OpenAPI.
_VOICE = (
    Operation("post", "/v1/audio/speech", "Speak a text: audio that transcribes back to exactly it", "audio",
              audio.SpeechRequest, extra={"responses": audio.SPEECH_RESPONSES}),
    Operation("post", "/v1/audio/transcriptions", "Transcribe audio", "audio", multipart=audio.TRANSCRIPTION_FORM,
              extra={"responses": audio.TRANSCRIPT_RESPONSES}),
    Operation("post", "/v1/audio/translations", "Translate audio into English", "audio",
              multipart=audio.TRANSCRIPTION_FORM, extra={"responses": audio.TRANSCRIPT_RESPONSES}),
)  # fmt: skip

OPERATIONS: list[Operation] = [
    Operation("get", "/health", "Liveness: answered by the event loop even while the model is busy", "server",
              raw=("application/json", {"type": "object"}), errors=()),
    Operation("get", "/openapi.json", "This document", "server", raw=("application/json", {"type": "object"}),
              errors=()),
    Operation("get", "/metrics", "Prometheus metrics (text exposition format)", "server",
              raw=("text/plain", {"type": "string"}), errors=()),
    Operation("get", "/v1/models", "List the answering profile's models", "models", response=outputs.ModelList),
    Operation("get", "/v1/models/{model}", "Retrieve a model", "models", response=outputs.Model,
              params=(_id("model"),)),
    Operation("post", "/v1/chat/completions", "Create a chat completion", "chat", ChatRequest,
              outputs.ChatCompletion, stream=outputs.ChatCompletionChunk),
    Operation("get", "/v1/chat/completions", "List stored chat completions", "chat",
              response=outputs.ChatCompletionList,
              params=(Param("model", "query", {"type": "string"}), *_PAGE)),
    Operation("get", "/v1/chat/completions/{completion_id}", "Retrieve a stored chat completion", "chat",
              response=outputs.ChatCompletion, params=(_id("completion_id"),)),
    Operation("post", "/v1/chat/completions/{completion_id}", "Update a stored chat completion's metadata", "chat",
              response=outputs.ChatCompletion, params=(_id("completion_id"),),
              extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                  "type": "object", "properties": {"metadata": {"type": ["object", "null"],
                                                                "additionalProperties": {"type": "string"}}},
                  "required": ["metadata"]}}}}}),
    Operation("delete", "/v1/chat/completions/{completion_id}", "Delete a stored chat completion", "chat",
              response=outputs.ChatCompletionDeleted, params=(_id("completion_id"),)),
    Operation("get", "/v1/chat/completions/{completion_id}/messages", "List a stored chat completion's messages",
              "chat", response=outputs.ChatMessageList, params=(_id("completion_id"), *_PAGE)),
    Operation("post", "/v1/completions", "Create a completion", "completions", CompletionRequest,
              outputs.Completion, stream=outputs.Completion),
    Operation("post", "/v1/messages", "Anthropic: create a message (also under /anthropic/)", "anthropic",
              anthropic.AnthropicRequest, extra={"responses": anthropic.OPENAPI_RESPONSES}),
    Operation("post", "/v1/messages/count_tokens", "Anthropic: count a message's input tokens", "anthropic",
              anthropic.CountTokensRequest, extra={"responses": anthropic.OPENAPI_RESPONSES}),
    Operation("post", "/v1beta/models/{name}", "Gemini: models/{model}:generateContent, :streamGenerateContent "
              "(?alt=sse), :countTokens, :embedContent, :batchEmbedContents (also under /gemini/v1beta/, /gemini/v1/)",
              "gemini", params=(_id("name"),), extra=_GEMINI_POST),
    *(Operation("post", path, "Gemini: the template's method on a listed model's fixed path", "gemini",
                extra=_GEMINI_POST) for path in gemini_routes.FIXED),
    Operation("get", "/v1beta/models", "Gemini: list the models", "gemini",
              extra={"responses": gemini.OPENAPI_RESPONSES}),
    Operation("get", "/v1beta/models/{name}", "Gemini: retrieve a model", "gemini", params=(_id("name"),),
              extra={"responses": gemini.OPENAPI_RESPONSES}),
    Operation("post", "/v1/responses", "Create a response", "responses", ResponsesRequest, outputs.ResponseObject,
              stream=outputs.ResponseStreamEvent),
    Operation("post", "/v1/responses/input_tokens", "Count a response's input tokens", "responses",
              InputTokensRequest, outputs.InputTokens),
    Operation("get", "/v1/responses/{response_id}", "Retrieve a response, or resume its stream", "responses",
              response=outputs.ResponseObject, stream=outputs.ResponseStreamEvent,
              params=(_id("response_id"), Param("stream", "query", {"type": "boolean"}),
                      Param("starting_after", "query", {"type": "integer", "minimum": -1}))),
    Operation("delete", "/v1/responses/{response_id}", "Delete a response", "responses",
              response=outputs.ResponseDeleted, params=(_id("response_id"),)),
    Operation("post", "/v1/responses/{response_id}/cancel", "Cancel a background response", "responses",
              response=outputs.ResponseObject, params=(_id("response_id"),)),
    Operation("get", "/v1/responses/{response_id}/input_items", "List a response's input items", "responses",
              response=outputs.InputItemList, params=(_id("response_id"), *_PAGE)),
    Operation("post", "/v1/embeddings", "Create embeddings", "embeddings", EmbeddingRequest, outputs.EmbeddingList),
    Operation("post", "/v1/images/generations", "Create images", "images", ImageRequest, outputs.ImagesResponse),
    Operation("post", "/v1/images/edits", "Edit an image", "images", response=outputs.ImagesResponse,
              multipart=_form(EditRequest, ("image", "mask"), ("image", "prompt"))),
    Operation("post", "/v1/images/variations", "Create variations of an image", "images",
              response=outputs.ImagesResponse, multipart=_form(VariationRequest, ("image",), ("image",))),
    Operation("delete", "/v1/models/{model}", "Delete a fine-tuned model (ft: ids; a base model is a 404)",
              "models", params=(_id("model"),), raw=("application/json", _OBJECT)),
    Operation("post", "/v1/moderations", "Classify text and images (a deterministic word-list rule)",
              "moderations", raw=("application/json", _OBJECT), extra=_body({"input": {}, "model": {"type": "string"}},
                                                                              ("input",))),
    Operation("post", "/v1/responses/compact", "Compact a conversation", "responses", CompactRequest,
              raw=("application/json", _OBJECT)),
    Operation("post", "/tokenize", "vLLM: a prompt's or a chat's token ids (also under /vllm/)", "vllm",
              raw=("application/json", _OBJECT),
              extra=_body({"model": {"type": "string"}, "prompt": {"type": "string"}, "messages": {"type": "array"}})),
    Operation("post", "/detokenize", "vLLM: the text of token ids (also under /vllm/)", "vllm",
              raw=("application/json", _OBJECT),
              extra=_body({"model": {"type": "string"}, "tokens": {"type": "array", "items": {"type": "integer"}}},
                          ("tokens",))),
    Operation("get", "/tokenizer_info", "vLLM: the tokenizer's special tokens and chat template (also under /vllm/)",
              "vllm", raw=("application/json", _OBJECT), errors=()),
    Operation("get", "/images/{image_id}.png", "An image answered with response_format 'url'", "images",
              params=(_id("image_id"),), raw=("image/png", {"type": "string", "format": "binary"}), errors=(404,)),
    *_PLATFORM,
    *_CONVERSATIONS,
    *_VOICE,
]  # fmt: skip


def _content(model: type[BaseModel] | None, stream: type[BaseModel] | None) -> Json:
    content: Json = {}
    if model is not None:
        content["application/json"] = {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
    if stream is not None:
        # Each event as SSE parsers see it: an optional name, and data that is JSON of the
        # frame model (or the ``[DONE]`` terminator of chat and completions streams).
        frame = {"$ref": f"#/components/schemas/{stream.__name__}"}
        json_data = {"type": "string", "contentMediaType": "application/json", "contentSchema": frame}
        event = {
            "type": "object",
            "properties": {"event": {"type": "string"}, "data": {"anyOf": [{"const": "[DONE]"}, json_data]}},
            "required": ["data"],
            "description": f"One server-sent event; its data is a {stream.__name__}.",
        }
        content["text/event-stream"] = {"schema": event}
    return content


def _operation(op: Operation) -> Json:
    body: Json = {"summary": op.summary, "tags": [op.tag], "operationId": f"{op.method}_{op.path}"}
    if op.params:
        body["parameters"] = [
            {"name": p.name, "in": p.where, "required": p.where == "path", "schema": p.schema}
            | ({"description": p.description} if p.description else {})
            for p in op.params
        ]
    if op.request is not None:
        schema = {"$ref": f"#/components/schemas/{op.request.__name__}"}
        body["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
    if op.multipart is not None:
        body["requestBody"] = {"required": True, "content": {"multipart/form-data": {"schema": op.multipart}}}
    ok: Json = {"description": "OK"}
    content = _content(op.response, op.stream)
    if op.raw is not None:
        content[op.raw[0]] = {"schema": op.raw[1]}
    if content:
        ok["content"] = content
    responses: Json = {"200": ok}
    for status in op.errors:
        error = {"$ref": "#/components/schemas/ErrorResponse"}
        responses[str(status)] = {"description": "Error", "content": {"application/json": {"schema": error}}}
    body["responses"] = responses
    return body | op.extra


@cache
def document() -> Json:
    """The whole document (built once: it depends on nothing but the code)."""
    models: set[type[BaseModel]] = {outputs.ErrorResponse}
    for op in OPERATIONS:
        models.update(m for m in (op.request, op.response, op.stream) if m is not None)
    ordered = sorted(models, key=lambda m: m.__name__)
    modes = [(m, "validation" if _is_request(m) else "serialization") for m in ordered]
    _, definitions = models_json_schema(modes, ref_template="#/components/schemas/{model}")  # type: ignore[arg-type]
    paths: Json = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mockserver",
            "version": "0.1.0",
            "description": "An OpenAI-compatible test double. Every /v1 path is also served under a "
            "provider prefix (/fireworks/v1/…, /together/v1/…) answering in that provider's dialect.",
        },
        "paths": paths,
        "components": {"schemas": definitions.get("$defs", {})},
    }


def _is_request(model: type[BaseModel]) -> bool:
    return not model.__module__.endswith(".outputs")
