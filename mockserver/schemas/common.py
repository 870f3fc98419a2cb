"""Pieces shared by the request schemas, and the mapping of validation errors to 400s."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mockserver.errors import InvalidRequest

__all__ = ["MAX_STOP", "StreamOptions", "WireModel", "invalid_request", "stop_tuple"]

MAX_STOP = 4  # OpenAI accepts at most four stop sequences


class WireModel(BaseModel):
    """Strict: ``"5"`` is not an integer and ``true`` is not a number, as on OpenAI.
    Unknown fields are ignored (the providers' issue decides per profile)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class StreamOptions(WireModel):
    include_usage: bool = False


class StopMixin(WireModel):
    stop: str | list[str] | None = Field(None)

    @field_validator("stop")
    @classmethod
    def _at_most_four(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and len(value) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop sequences are allowed, got {len(value)}")
        return value


def stop_tuple(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    return (stop,) if isinstance(stop, str) else tuple(stop)


# Names pydantic puts into an error location for union members; they are not body paths.
_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "function-after", "json-or-python"})


def _param(loc: tuple[int | str, ...]) -> str | None:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.isidentifier() and part not in _TAGS and not part[:1].isupper():
            path += f".{part}" if path else part
    return path or None


def invalid_request(exc: ValidationError) -> InvalidRequest:
    """The first validation error as OpenAI's 400, naming the parameter."""
    error = exc.errors(include_url=False)[0]
    param = _param(tuple(error["loc"]))
    if error["type"] == "missing":
        return InvalidRequest(f"Missing required parameter: '{param}'.", param=param)
    message = str(error["msg"])
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return InvalidRequest(f"Invalid value for '{param}': {message}.", param=param)
