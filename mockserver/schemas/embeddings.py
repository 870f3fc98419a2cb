"""``POST /v1/embeddings`` request body (``CreateEmbeddingRequest``).

Only the shapes are checked here; emptiness, counts and token limits are OpenAI's rules in
:mod:`mockserver.media.vectors`, where they can name the offending input (``input[3]``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mockserver.schemas.common import WireModel

__all__ = ["EmbeddingInput", "EmbeddingRequest"]

# A string, strings, one list of token ids, or lists of token ids.
EmbeddingInput = str | list[str] | list[int] | list[list[int]]


class EmbeddingRequest(WireModel):
    model: str
    input: EmbeddingInput
    dimensions: int | None = Field(None, ge=1)
    encoding_format: Literal["float", "base64"] | None = None  # None: float
    user: str | None = None
