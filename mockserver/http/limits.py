"""What one request may ask of the server, and the edge that holds every request to it.

:class:`Limits` are data, built once by ``create_app`` from the settings (``--max-body-bytes``,
``--max-json-depth``, ``--max-choices``, ``--max-list``) and handed down: to the edge, and to
the codecs through their :class:`~mockserver.routes.codec.Options`.

The edge calls :func:`take_body`, in front of every path (``/v1/…``, ``/__mockserver/…``
and the rest). For a request with a body it

* answers 413 at once when ``content-length`` says the body is over the limit (nothing of
  it is read; uvicorn discards what still arrives, and the connection serves the next
  request), and stops reading a chunked body as soon as it passes the limit;
* for a JSON body (one that opens with ``{`` or ``[``), answers 400 when it nests deeper than
  the limit (:func:`too_deep`, a scan of the bytes, before any parser recurses into it) or
  holds a number JSON has no room for (``NaN``, ``Infinity``, ``1e400``: see
  :func:`~mockserver.wire.json.loads`), naming the field;
* leaves ``(raw, parsed)`` in the scope under :data:`~mockserver.wire.scope.BODY_KEY`, so the
  body is parsed once, here, and passes it on to the app replayed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive, Scope

from mockserver.errors import InvalidRequest, RequestTooLarge
from mockserver.http.body import read_body
from mockserver.http.gone import ClientGone
from mockserver.wire.json import NotJson, loads
from mockserver.wire.scope import BODY_KEY

__all__ = ["Limits", "TooDeep", "framing", "take_body", "too_deep"]

LARGE = 64 * 1024  # bytes: a body this big is scanned for depth off the event loop


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request may ask for (the settings' ``max_*`` fields)."""

    body_bytes: int = 8 * 1024 * 1024  # the largest request body (413 beyond)
    json_depth: int = 64  # the deepest nesting of a JSON body (400 beyond)
    choices: int = 256  # choices one request may generate: prompts × n (or best_of)
    list_entries: int = 1024  # entries of logit_bias, stop_token_ids, tools and other lists


class TooDeep(InvalidRequest):
    def __init__(self, limit: int) -> None:
        super().__init__(
            f"The JSON body of your request nests deeper than {limit} levels of arrays and objects, "
            "this server's limit (--max-json-depth)."
        )


# Every byte but the four brackets goes; the closing ones all become ']' and the opening '['
# (nesting is all that is counted here: whether the brackets pair up is the parser's business).
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def too_deep(raw: bytes, limit: int) -> bool:
    """Does the JSON text ``raw`` nest arrays and objects deeper than ``limit``? Brackets inside
    strings do not count. Only C-speed bytes operations, none of them recursive: a body with
    few brackets is answered by counting them; otherwise strings are cut out, the brackets
    kept, and innermost pairs removed a level at a time (each removal lowers the depth by
    one), stopping as soon as a run of opening brackets proves the depth or nothing is left.
    For text that is not JSON the answer may be either (the parser refuses it anyway)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    if b'"' in raw:
        # In JSON a backslash appears only inside strings, escaping the next character: take
        # the escaped backslashes out, then the escaped quotes, and every '"' left opens or
        # closes a string, so every other piece between quotes is outside the strings.
        pieces = raw.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')
        raw = b"".join(pieces[::2])
    nesting = raw.translate(_BRACKETS, _NOT_BRACKETS)
    removed = 0
    while b"[" in nesting:
        # A run of k '[' is k levels still open at its end: ``removed`` levels came off before.
        if b"[" * (limit - removed + 1) in nesting:
            return True
        if removed == limit:
            return True
        shorter = nesting.replace(b"[]", b"")
        if len(shorter) == len(nesting):  # nothing pairs up: not JSON
            return False
        nesting = shorter
        removed += 1
    return False


def framing(headers: list[tuple[bytes, bytes]]) -> tuple[int | None, bool]:
    """The declared ``content-length`` (None: none, or not a number) and whether the body is
    chunked."""
    length: int | None = None
    chunked = False
    for key, value in headers:
        if key == b"content-length":
            try:
                length = int(value)
            except ValueError:
                length = None
        elif key == b"transfer-encoding":
            chunked = True
    return length, chunked


def _json_text(raw: bytes) -> bool:
    """Does the body open as a JSON object or array (after whitespace)?"""
    return raw[:1] in (b"{", b"[") or raw.lstrip()[:1] in (b"{", b"[")


async def take_body(scope: Scope, receive: Receive, limits: Limits) -> bytes | None:
    """The request's body, read against ``limits`` (see the module docstring); a JSON one is left
    parsed in the scope under :data:`~mockserver.wire.scope.BODY_KEY`. None: the request has no
    body (nothing was read). Raises :class:`~mockserver.errors.RequestTooLarge` (413) or
    :class:`~mockserver.errors.InvalidRequest` (400) for a body the limits refuse, and
    :class:`~mockserver.http.gone.ClientGone` when the client left while sending it."""
    length, chunked = framing(scope["headers"])
    if not chunked and not length:  # no body: nothing to hold
        return None
    limit = limits.body_bytes
    if length is not None and length > limit:
        raise RequestTooLarge(limit, length)
    raw = await read_body(receive, limit)
    if raw is None:  # the client left while sending it: nobody to answer
        raise ClientGone()
    if _json_text(raw):
        scope[BODY_KEY] = (raw, await _parsed(raw, limits.json_depth))
    return raw


async def _parsed(raw: bytes, depth: int) -> Any:
    """The JSON body (None when it is not JSON: the handler says why), or the 400 for a body
    too deep or holding a number JSON cannot carry."""
    deep = await asyncio.to_thread(too_deep, raw, depth) if len(raw) > LARGE else too_deep(raw, depth)
    if deep:
        raise TooDeep(depth)
    try:
        return loads(raw)
    except NotJson:
        return None
