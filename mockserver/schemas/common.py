"""Pieces shared by the request schemas, and the mapping of validation errors to 400s."""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mockserver.errors import ECHO, InvalidRequest, clip

__all__ = [
    "MAX_STOP",
    "GenerationFields",
    "StreamOptions",
    "WireModel",
    "invalid_request",
    "refuse_unencodable",
    "stop_tuple",
    "unencodable",
    "validated",
]

MAX_STOP = 4  # OpenAI accepts at most four stop sequences


class WireModel(BaseModel):
    """Strict: ``"5"`` is not an integer and ``true`` is not a number, as on OpenAI.
    Unknown fields are ignored here; :mod:`mockserver.routes.params` applies the profile's rule."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class StreamOptions(WireModel):
    include_usage: bool = False


class GenerationFields(WireModel):
    """Fields both generation endpoints take: OpenAI's, and every sampling extension the
    providers document (each described in :mod:`mockserver.backends.reference.sampling`). Ranges here are the
    ones every provider shares; a profile's tighter upper bounds are its ``limits``."""

    model: str
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=-1)  # 0 and -1 mean off
    min_p: float | None = Field(None, ge=0, le=1)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    repetition_penalty: float | None = Field(None, gt=0, le=2)
    logit_bias: dict[str, Any] | None = None  # checked as a whole, so every bad key is named
    mirostat_target: float | None = Field(None, gt=0)
    mirostat_lr: float | None = Field(None, gt=0, le=1)
    n: int | None = Field(None, ge=1, le=128)
    best_of: int | None = Field(None, ge=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool | None = None
    min_tokens: int | None = Field(None, ge=0)
    ignore_eos: bool | None = None
    context_length_exceeded_behavior: Literal["truncate", "error"] | None = None
    prompt_logprobs: int | None = Field(None, ge=0)
    truncate_prompt_tokens: int | None = Field(None, ge=1)
    service_tier: str | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    user: str | None = None

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
            part = clip(part, 40)  # a key of the body (metadata's) is the sender's text
            path += f".{part}" if path else part
    return path or None


_M = TypeVar("_M", bound=BaseModel)


def validated(model: type[_M], data: Any) -> _M:
    """``data`` read as ``model``; OpenAI's 400 naming the offending field when it is not one."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid_request(exc) from None
    except UnicodeEncodeError:  # pydantic-core met a lone surrogate where it needs text (a tag)
        refuse_unencodable(data, "")
        raise


def unencodable(value: Any, path: str) -> str | None:
    """Where in ``value`` (a parsed JSON body or part of one, at ``path``) the first string —
    a value or an object's key — is no UTF-8-encodable text: JSON may escape half a surrogate
    pair (``"\\ud800"``), which no answer, store or log can write. None: there is none."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if not _text(item):
                return where
        elif isinstance(item, dict):
            for key, inner in reversed(list(item.items())):
                at = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and not _text(key):
                    return _shown(at)
                stack.append((inner, at))
        elif isinstance(item, list | tuple):
            stack.extend((inner, f"{where}[{i}]") for i, inner in reversed(list(enumerate(item))))
    return None


def _text(value: str) -> bool:
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(text: str) -> str:
    """``text`` as a message or ``param`` may carry it: a lone surrogate as its ``\\u`` escape."""
    return text if _text(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def refuse_unencodable(value: Any, path: str) -> None:
    """A 400 naming the field of ``value`` that holds no valid Unicode (see :func:`unencodable`)."""
    where = unencodable(value, path)
    if where is not None:
        where = _shown(where)
        raise InvalidRequest(
            f"Invalid value for '{where}': it is not valid Unicode (a lone surrogate escape such as \\ud800).",
            param=where,
        )


def invalid_request(exc: ValidationError) -> InvalidRequest:
    """The most specific validation error as OpenAI's 400, naming the parameter. When a
    union fails (``input`` is a string or a list of items), the error from deepest inside
    the body says what is wrong (``input[0].role``), not "should be a valid string"."""
    errors = exc.errors(include_url=False)
    error = max(errors, key=lambda e: len(e["loc"]))  # the first of the deepest
    found = _param(tuple(error["loc"]))
    param = _shown(found) if found is not None else None  # a key may hold a lone surrogate
    if error["type"] == "missing":
        return InvalidRequest(f"Missing required parameter: '{param}'.", param=param)
    message = _shown(str(error["msg"]))
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    # pydantic may quote the input (a union's unknown tag): a short prefix of it at most.
    return InvalidRequest(f"Invalid value for '{param}': {clip(message, 2 * ECHO)}.", param=param)
