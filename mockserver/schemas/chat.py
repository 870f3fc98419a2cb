"""``POST /v1/chat/completions`` request body."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from mockserver.schemas.common import GenerationFields, WireModel

__all__ = ["ChatMessageIn", "ChatRequest", "TextPart"]

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class TextPart(WireModel):
    type: Literal["text"]
    text: str


class ChatMessageIn(WireModel):
    role: Role
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatRequest(GenerationFields):
    messages: list[ChatMessageIn]
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    # OpenAI: a boolean. Together and Fireworks also take an integer k (k alternatives).
    logprobs: bool | int | None = None
    top_logprobs: int | None = Field(None, ge=0)  # the upper bound is the profile's
    store: bool | None = None  # keep the completion for GET /v1/chat/completions/{id}
    metadata: dict[str, str] | None = None

    @field_validator("messages")
    @classmethod
    def _not_empty(cls, value: list[ChatMessageIn]) -> list[ChatMessageIn]:
        if not value:
            raise ValueError("messages must contain at least one message")
        return value
