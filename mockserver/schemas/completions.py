"""``POST /v1/completions`` request body."""

from __future__ import annotations

from pydantic import Field, field_validator

from mockserver.schemas.common import StopMixin, StreamOptions

__all__ = ["CompletionRequest"]

PromptInput = str | list[str] | list[int] | list[list[int]]


class CompletionRequest(StopMixin):
    model: str
    prompt: PromptInput
    max_tokens: int | None = Field(None, ge=0)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=-1)
    n: int | None = Field(None, ge=1, le=128)
    seed: int | None = None
    echo: bool | None = None
    logprobs: int | None = Field(None, ge=0)  # the upper bound is the profile's
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    user: str | None = None

    @field_validator("prompt")
    @classmethod
    def _not_empty(cls, value: PromptInput) -> PromptInput:
        if isinstance(value, list) and (not value or any(isinstance(v, list) and not v for v in value)):
            raise ValueError("a prompt list and each token list in it must not be empty")
        return value
