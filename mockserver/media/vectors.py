"""``POST /v1/embeddings``, the pure parts: models and their dimensions, limits, the wire body.

Torch-free: the vectors themselves come from a backend that has an ``embed`` method (the
reference backend pools its model's hidden states, see :mod:`mockserver.backends.reference.pooling`).
What is decided here is what OpenAI decides:

* each model id's native dimension (``text-embedding-3-small`` 1536, ``-3-large`` 3072,
  ``ada-002`` 1536; any other id :data:`DEFAULT_DIMENSION`), and whether it may be shortened
  with ``dimensions`` (the ``text-embedding-3`` models may: the native vector is truncated and
  re-normalised; ``ada-002`` may not: 400);
* the token ids an input may hold: the model's real vocabulary (:func:`fold_tokens`);
* the limits: at most :data:`MAX_INPUTS` inputs, none empty, each at most
  :data:`MAX_INPUT_TOKENS` tokens, all together at most :data:`MAX_REQUEST_TOKENS`;
* the body, with ``encoding_format: "base64"`` as little-endian float32 bytes (what the
  OpenAI SDK asks for by default and decodes with ``numpy.frombuffer(..., dtype="float32")``).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from mockserver.errors import ContextLengthExceeded, InvalidRequest
from mockserver.gpt import vocabularies
from mockserver.spine.seeding import digest
from mockserver.wire.json import dumps

__all__ = [
    "DEFAULT_DIMENSION",
    "MAX_INPUTS",
    "MAX_INPUT_TOKENS",
    "MAX_REQUEST_TOKENS",
    "MODELS",
    "Embedder",
    "ModelInfo",
    "Space",
    "TokenCheck",
    "check_tokens",
    "fold_tokens",
    "inputs",
    "render",
    "response",
    "space",
]

MAX_INPUTS = 2048
MAX_INPUT_TOKENS = 8192  # per input, for every OpenAI embedding model
MAX_REQUEST_TOKENS = 300_000  # all inputs of one request together
DEFAULT_DIMENSION = 1536  # ids not in MODELS: the most common OpenAI size


@dataclass(frozen=True, slots=True)
class ModelInfo:
    native: int  # the vector size without ``dimensions``
    shortenable: bool  # accepts ``dimensions`` (Matryoshka-trained: truncate, re-normalise)


MODELS: dict[str, ModelInfo] = {
    "text-embedding-3-small": ModelInfo(1536, True),
    "text-embedding-3-large": ModelInfo(3072, True),
    "text-embedding-ada-002": ModelInfo(1536, False),
}
_OTHER = ModelInfo(DEFAULT_DIMENSION, True)  # a test double accepts what it cannot know to refuse


@dataclass(frozen=True, slots=True)
class Space:
    """Where a request's vectors live: the model's own space, maybe shortened."""

    model: str
    native: int
    dimensions: int  # ≤ native: the first ``dimensions`` coordinates, re-normalised
    seed: int  # of the model's fixed projection: each model id has a space of its own


TokenCheck = Callable[[Sequence[Sequence[int]]], None]


@runtime_checkable
class Embedder(Protocol):
    """A backend that computes embeddings (the reference backend does)."""

    async def embed(
        self, inputs: Sequence[str | Sequence[int]], space: Space, check: TokenCheck, *, for_json: bool = False
    ) -> tuple[list[list[float]], int]:
        """Unit vectors of ``space.dimensions`` float32 values, one per input, and the tokens
        counted. ``check`` gets every input's token ids before any compute, and raises to refuse.
        ``for_json``: each value as the double nearest its shortest float32 decimal, for a short
        JSON body (packing it as float32 still gives the exact value back)."""
        ...


def space(model: str, dimensions: int | None) -> Space:
    info = MODELS.get(model, _OTHER)
    if dimensions is None:
        dimensions = info.native
    elif not info.shortenable:
        raise InvalidRequest("This model does not support specifying dimensions.", param="dimensions")
    elif dimensions > info.native:
        raise InvalidRequest(
            f"Invalid value for 'dimensions': {model} has {info.native} dimensions; ask for at most {info.native}.",
            param="dimensions",
        )
    seed = int.from_bytes(digest(b"embedding-projection", model)[:8], "big") >> 1  # ≥ 0 for torch
    return Space(model, info.native, dimensions, seed)


def inputs(value: str | list[str] | list[int] | list[list[int]]) -> tuple[list[str | list[int]], bool]:
    """The inputs one by one, and whether the request sent just one (then errors name ``input``,
    else ``input[i]``). A flat list of integers is one input of token ids."""
    items: list[str | list[int]] = []
    tokens: list[int] = []  # the schema lets no list mix integers with anything else
    for item in [value] if isinstance(value, str) else value:
        if isinstance(item, int):
            tokens.append(item)
        else:
            items.append(item)
    single = isinstance(value, str) or bool(tokens)
    if tokens:
        items = [tokens]
    if not items:
        raise InvalidRequest("Invalid value for 'input': it must not be an empty list.", param="input")
    if len(items) > MAX_INPUTS:
        raise InvalidRequest(
            f"Invalid value for 'input': at most {MAX_INPUTS} inputs are allowed, got {len(items)}.", param="input"
        )
    for i, item in enumerate(items):
        if len(item) == 0:
            what = "an empty string" if isinstance(item, str) else "an empty list of tokens"
            name = _name(i, single)
            raise InvalidRequest(f"Invalid value for '{name}': it must not be {what}.", param=name)
        if isinstance(item, str) and not _unicode(item):
            name = _name(i, single)
            raise InvalidRequest(
                f"Invalid value for '{name}': it is not valid Unicode (a lone surrogate escape such as \\ud800).",
                param=name,
            )
    return items, single


def _unicode(text: str) -> bool:
    """JSON may escape half a surrogate pair (``"\\ud800"``); no encoder can tokenise that."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _name(index: int, single: bool) -> str:
    return "input" if single else f"input[{index}]"


def fold_tokens(
    items: list[str | list[int]], model: str, reference: int | None, *, single: bool
) -> list[str | list[int]]:
    """Token-id inputs checked against ``model``'s real vocabulary (``text-embedding-3-*`` and
    ``ada-002`` read tiktoken's ``cl100k_base`` ids, as LangChain's ``OpenAIEmbeddings`` sends
    them) and folded into the reference model's (:mod:`mockserver.gpt.vocabularies`), one token
    per id sent; a 400 names the first input with an id outside. Texts pass as they are."""
    if reference is None:
        return items
    size = vocabularies.vocabulary(model, reference)
    for i, item in enumerate(items):
        if isinstance(item, list):
            _check_range(item, size, _name(i, single), f" of {model}" if size != reference else "")
    if size == reference:
        return items
    return [vocabularies.fold_all(item, model, reference) if isinstance(item, list) else item for item in items]


def _check_range(tokens: Sequence[int], vocab: int | None, name: str, whose: str = "") -> None:
    bad = sorted({t for t in tokens if t < 0 or (vocab is not None and t >= vocab)})
    if bad:
        shown = ", ".join(map(str, bad[:5])) + (", …" if len(bad) > 5 else "")
        what = f"token ids {shown} are" if len(bad) > 1 else f"token id {shown} is"
        where = f"outside the vocabulary [0, {vocab}){whose}" if vocab is not None else "negative"
        raise InvalidRequest(f"Invalid value for '{name}': {what} {where}.", param=name)


def check_tokens(ids: Sequence[Sequence[int]], *, vocab: int | None, single: bool) -> None:
    """Every token id in the reference vocabulary (:func:`fold_tokens` folded what the client
    sent into it), every input within the context, the request within
    its token budget; the first problem is a 400 naming the input."""
    total = 0
    for i, tokens in enumerate(ids):
        _check_range(tokens, vocab, _name(i, single))
        if len(tokens) > MAX_INPUT_TOKENS:
            raise ContextLengthExceeded(MAX_INPUT_TOKENS, len(tokens), 0, _name(i, single))
        total += len(tokens)
    if total > MAX_REQUEST_TOKENS:
        raise InvalidRequest(f"Requested {total} tokens, max {MAX_REQUEST_TOKENS} tokens per request", param="input")


def _base64(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def response(
    model: str, vectors: list[list[float]], tokens: int, encoding: Literal["float", "base64"]
) -> dict[str, Any]:
    """The ``CreateEmbeddingResponse`` body."""
    data = [
        {"object": "embedding", "index": i, "embedding": _base64(v) if encoding == "base64" else v}
        for i, v in enumerate(vectors)
    ]
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def render(body: dict[str, Any]) -> bytes:
    """``dumps(body)`` byte for byte, one embedding at a time. Why: 100 × 1536 floats take
    ~100 ms to write, and ``json`` holds the GIL for the whole of one call; run in a thread,
    separate calls hand the GIL back to the event loop between embeddings."""
    items = b",".join(dumps(item) for item in body["data"])
    model, usage = dumps(body["model"]), dumps(body["usage"])
    return b'{"object":"list","data":[' + items + b'],"model":' + model + b',"usage":' + usage + b"}"
