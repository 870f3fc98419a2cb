"""``/v1/conversations`` request bodies: create (metadata and up to 20 items), update
(metadata, required), and items create (1 to 20 items). Items are Responses input items
(:data:`~mockserver.schemas.responses.InputItem`), read as ``POST /v1/responses`` reads them.
Metadata is OpenAI's: at most 16 pairs, keys up to 64 characters, values up to 512.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from mockserver.schemas.common import WireModel
from mockserver.schemas.responses import InputItem

__all__ = ["CreateConversation", "CreateItems", "UpdateConversation", "checked_metadata"]

MAX_ITEMS = 20  # items one request may add (the spec's maxItems)


def checked_metadata(value: dict[str, str] | None) -> dict[str, str] | None:
    if value is None:
        return None
    if len(value) > 16:
        raise ValueError("at most 16 key-value pairs are allowed")
    for key, text in value.items():
        if len(key) > 64:
            raise ValueError(f"keys are at most 64 characters, not {len(key)}")
        if len(text) > 512:
            raise ValueError(f"values are at most 512 characters, not {len(text)}")
    return value


class CreateConversation(WireModel):
    metadata: dict[str, str] | None = None
    items: list[InputItem] | None = Field(None, max_length=MAX_ITEMS)

    _metadata = field_validator("metadata")(checked_metadata)


class UpdateConversation(WireModel):
    metadata: dict[str, str]

    _metadata = field_validator("metadata")(checked_metadata)


class CreateItems(WireModel):
    items: list[InputItem] = Field(min_length=1, max_length=MAX_ITEMS)
