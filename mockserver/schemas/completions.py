"""``POST /v1/completions`` request body."""

from __future__ import annotations

from pydantic import Field, field_validator

from mockserver.schemas.common import GenerationFields
from mockserver.schemas.tools import ResponseFormat

__all__ = ["CompletionRequest"]

PromptInput = str | list[str] | list[int] | list[list[int]]
# What a null prompt means (the spec allows one): "the document separator the model sees during
# training", so the model writes as if from the start of a new document.
NEW_DOCUMENT = "<|endoftext|>"


class CompletionRequest(GenerationFields):
    prompt: PromptInput
    suffix: str | None = None
    max_tokens: int | None = Field(None, ge=0)
    echo: bool | None = None
    logprobs: int | None = Field(None, ge=0)  # the upper bound is the profile's
    images: list[str] | None = None  # Fireworks: data URLs of the prompt's images (counted, not seen)
    response_format: ResponseFormat | None = None  # Fireworks and Together: JSON mode

    @field_validator("prompt", mode="before")
    @classmethod
    def _null_is_a_new_document(cls, value: object) -> object:
        return NEW_DOCUMENT if value is None else value

    @field_validator("prompt")
    @classmethod
    def _not_empty(cls, value: PromptInput) -> PromptInput:
        if isinstance(value, list) and (not value or any(isinstance(v, list) and not v for v in value)):
            raise ValueError("a prompt list and each token list in it must not be empty")
        return value
