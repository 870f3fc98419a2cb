"""``POST /v1/chat/completions`` request body."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator

from mockserver.schemas.common import GenerationFields, WireModel
from mockserver.schemas.tools import FunctionCall, FunctionDef, FunctionTool, ResponseFormat, ToolChoice

__all__ = ["ChatMessageIn", "ChatRequest", "ImagePart", "TextPart"]

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class TextPart(WireModel):
    type: Literal["text"]
    text: str


class ImageUrl(WireModel):
    url: str
    detail: str | None = None  # low | high | auto, checked with the image (mockserver.media.vision)


class ImagePart(WireModel):
    type: Literal["image_url"]
    image_url: ImageUrl


def _part_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "ImagePart" if kind == "image_url" else "TextPart"  # class names: error paths skip them


Part = Annotated[
    Annotated[TextPart, Tag("TextPart")] | Annotated[ImagePart, Tag("ImagePart")], Discriminator(_part_tag)
]


class ChatMessageIn(WireModel):
    role: Role
    content: str | list[Part] | None = None
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    function_call: dict[str, Any] | None = None  # the legacy form of one tool call

    def text(self) -> str:
        """What the model reads of this message: its text, and any calls it made as JSON
        (the model cannot see images; they are counted, see :meth:`images`)."""
        if self.content is None:
            text = ""
        elif isinstance(self.content, str):
            text = self.content
        else:
            text = "".join(part.text for part in self.content if isinstance(part, TextPart))
        calls = self.tool_calls or ([self.function_call] if self.function_call else [])
        if calls:
            rendered = json.dumps(calls, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
            text = f"{text}\n{rendered}" if text else rendered
        return text

    def images(self) -> list[tuple[int, ImageUrl]]:
        """The message's image parts, by their index in ``content``."""
        if not isinstance(self.content, list):
            return []
        return [(i, part.image_url) for i, part in enumerate(self.content) if isinstance(part, ImagePart)]


class ChatRequest(GenerationFields):
    messages: list[ChatMessageIn]
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    # OpenAI: a boolean. Together and Fireworks also take an integer k (k alternatives).
    logprobs: bool | int | None = None
    top_logprobs: int | None = Field(None, ge=0)  # the upper bound is the profile's
    tools: list[FunctionTool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    functions: list[FunctionDef] | None = None  # deprecated by OpenAI, still served
    function_call: FunctionCall | None = None
    response_format: ResponseFormat | None = None
    reasoning_effort: str | None = None  # reasoning models only (mockserver.answers.reasoning)
    store: bool | None = None  # keep the completion for GET /v1/chat/completions/{id}
    metadata: dict[str, str] | None = None

    @field_validator("messages")
    @classmethod
    def _not_empty(cls, value: list[ChatMessageIn]) -> list[ChatMessageIn]:
        if not value:
            raise ValueError("messages must contain at least one message")
        return value
