"""JSON as the wire carries it: read strictly, written compactly, the same bytes every time.

A leaf: it imports nothing of mockserver's but :mod:`mockserver.errors`, so every floor may use it.
JSON is read strictly (:func:`loads`): ``NaN``, ``Infinity`` and numbers too big for a double
(``1e400``) are no JSON numbers, and whatever was read may be echoed back, so they are a 400
naming the field, never a float that no JSON encoder can write.
"""

from __future__ import annotations

import json
import math
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from mockserver.errors import InvalidRequest, clip

__all__ = ["Json", "NotFinite", "NotJson", "dumps", "loads", "parse_json", "parse_lenient"]

Json = dict[str, Any]  # a JSON object, as the wire and the stores carry it

_NOT_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON.)"
)


class NotJson(ValueError):
    """Text that is not JSON (or nests deeper than the parser can follow)."""


class NotFinite(InvalidRequest):
    """A number JSON cannot carry, named by where it is in the body."""

    def __init__(self, literal: str, path: str | None) -> None:
        told = (
            f"'{clip(literal, 40)}' is not a JSON number: NaN and Infinity are not allowed, "
            "and numbers must fit a double."
        )
        where = f"Invalid value for '{path}': " if path else "Invalid JSON body: "
        super().__init__(where + told, param=path)


class _Unwritable(ValueError):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _constant(name: str) -> Any:
    raise _Unwritable(name)  # NaN, Infinity, -Infinity


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400: a float literal past the largest double
        raise _Unwritable(text)
    return value


def loads(raw: bytes | str) -> Any:
    """Strict JSON: :class:`NotJson` for what is not JSON, :class:`NotFinite` (a 400 naming
    the field) for ``NaN``, ``Infinity`` or a number that overflows a double."""
    try:
        if isinstance(raw, bytes):  # as json.loads reads bytes (UTF-8, -16 or -32)
            # An object or array whose second byte is no NUL has no BOM and is UTF-8, as
            # detect_encoding would say (after its Python-level checks, on every request).
            utf8 = raw[:1] in (b"{", b"[") and raw[1:2] != b"\x00"
            raw = raw.decode("utf-8" if utf8 else json.detect_encoding(raw), "surrogatepass")
        elif raw.startswith("\ufeff"):
            raise NotJson("Unexpected UTF-8 BOM (decode using utf-8-sig)")
        return _STRICT.decode(raw)
    except _Unwritable as exc:
        raise NotFinite(exc.literal, _path_of(raw)) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise NotJson(str(exc)) from None
    except RecursionError:
        raise NotJson("it nests too deeply") from None


# One decoder for every body: json.loads with arguments builds a decoder per call.
_STRICT = json.JSONDecoder(parse_constant=_constant, parse_float=_finite)


class _Marker:
    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _path_of(raw: bytes | str) -> str | None:
    """Where the first number JSON cannot carry is, as a parameter path (``tools[0].parameters.x``)."""

    def mark_float(text: str) -> Any:
        value = float(text)
        return _Marker(text) if math.isinf(value) else value

    try:
        parsed = json.loads(raw, parse_constant=_Marker, parse_float=mark_float)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, str]] = [(parsed, "")]
    while stack:  # depth first, in document order
        value, path = stack.pop()
        if isinstance(value, _Marker):
            return path or None
        if isinstance(value, dict):
            items = [(v, f"{path}.{clip(str(k), 40)}" if path else clip(str(k), 40)) for k, v in value.items()]
        elif isinstance(value, list):
            items = [(v, f"{path}[{i}]") for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(items))
    return None


def parse_lenient(raw: bytes) -> Any:
    """The JSON body, or None when there is none or it is no JSON (the handler says why)."""
    try:
        return loads(raw) if raw else None
    except (NotJson, NotFinite):
        return None


def parse_json(raw: bytes) -> Json:
    """The body as a JSON object, or OpenAI's 400 for anything else."""
    try:
        data = loads(raw)
    except NotJson:
        raise InvalidRequest(_NOT_JSON) from None
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return data


def dumps(obj: Any) -> bytes:
    """Compact JSON, UTF-8 kept as is (stable bytes for the same object). A lone surrogate
    (JSON may escape half a pair, ``"\\ud800"``, and a field such as ``model`` or ``metadata``
    echoes it back) has no UTF-8 form: such an object goes out ``\\u``-escaped instead.
    Never ``NaN`` or ``Infinity``, which no JSON parser reads: bodies holding them are refused
    at the wire (:func:`loads`) and nothing generated is non-finite, so a
    ValueError here is a bug, answered as one (a 500), never as invalid JSON."""
    text = "".join(_ENCODE(obj, 0)) if _ENCODE is not None else _COMPACT.encode(obj)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()


def _unencodable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# json.dumps with arguments builds an encoder per call, and JSONEncoder.encode builds its C
# encoder per call too: a stream encodes a chunk per token, so the C encoder is made once here,
# as JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False) makes it, but
# with no check for cycles (what is encoded is a tree the codecs just built).
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_ENCODE = (
    c_make_encoder(None, _unencodable, encode_basestring, None, ":", ",", False, False, False)
    if c_make_encoder is not None
    else None
)
