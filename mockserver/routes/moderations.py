"""``POST /v1/moderations``: a deterministic, offline classifier with OpenAI's shapes.

The rule (documented in docs/profiles.md): a text is flagged in a category when it contains
one of that category's words (:data:`WORDS`, whole words, any case) or the marker
``[flag:CATEGORY]`` (``[flag:violence/graphic]``), which flags any category on purpose. A
subcategory flags its parent too (``hate/threatening`` flags ``hate``). Scores are fixed by
the text: a flagged category scores 0.9 or more, the others under 0.001, each a hash of the
category and the text. Nothing is random, and images are not looked at (they count as inputs
for the categories that take images, and are never flagged).

``input`` is a string (one result), a list of strings (one result each) or a list of
multimodal parts (``text`` and ``image_url``: one result for them all), as the spec has it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest
from mockserver.http.body import json_body
from mockserver.routes import params
from mockserver.spine import seeding
from mockserver.wire.json import Json, dumps

__all__ = ["CATEGORIES", "DEFAULT_MODEL", "WORDS", "classify", "create"]

DEFAULT_MODEL = "omni-moderation-latest"
# The models the spec lists; others are echoed and answered as omni models.
TEXT_MODELS = frozenset({"text-moderation-latest", "text-moderation-stable"})
CATEGORIES = (
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/instructions",
    "self-harm/intent",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
)
# Categories an omni model also reads images for (the spec's category_applied_input_types).
WITH_IMAGES = frozenset(
    {"self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "violence", "violence/graphic"}
)
# Categories the text-moderation models do not have: null in their answers.
OMNI_ONLY = frozenset({"illicit", "illicit/violent"})
WORDS: dict[str, frozenset[str]] = {
    "harassment": frozenset({"idiot", "moron", "loser"}),
    "harassment/threatening": frozenset({"threaten", "threatening"}),
    "hate": frozenset({"subhuman", "vermin"}),
    "hate/threatening": frozenset({"exterminate"}),
    "illicit": frozenset({"counterfeit", "smuggle", "launder"}),
    "illicit/violent": frozenset({"bomb", "explosives"}),
    "self-harm": frozenset({"self-harm"}),
    "self-harm/instructions": frozenset({"overdose"}),
    "self-harm/intent": frozenset({"suicidal"}),
    "sexual": frozenset({"explicit", "nsfw"}),
    "sexual/minors": frozenset(),  # only by its marker
    "violence": frozenset({"kill", "murder", "stab", "shoot"}),
    "violence/graphic": frozenset({"gore", "dismember"}),
}
_WORD = re.compile(r"[a-z]+(?:-[a-z]+)*")  # hyphenated words whole: "self-harm"
_MARKER = re.compile(r"\[flag:([a-z/-]+)\]")


def _score(category: str, text: str, flagged: bool) -> float:
    unit = int.from_bytes(hashlib.sha256(f"{category}\0{text}".encode("utf-8", "surrogatepass")).digest()[:4], "big")
    fraction = unit / 2**32  # in [0, 1)
    return round(0.9 + 0.0999 * fraction, 6) if flagged else round(0.001 * fraction, 6)


def classify(texts: list[str], images: int, model: str) -> Json:
    """One result for ``texts`` read together, with ``images`` images beside them."""
    text = "\n".join(texts)
    lowered = text.lower()
    words = set(_WORD.findall(lowered))
    hit = {c for c in CATEGORIES if words & WORDS[c]} | {c for c in _MARKER.findall(lowered) if c in WORDS}
    hit |= {c.partition("/")[0] for c in hit}  # a subcategory flags its parent
    omni = model not in TEXT_MODELS
    if not omni:
        hit -= OMNI_ONLY  # categories a text-moderation model does not have
    categories: dict[str, bool | None] = {c: None if not omni and c in OMNI_ONLY else c in hit for c in CATEGORIES}
    scores = {c: _score(c, text, c in hit) if categories[c] is not None else 0.0 for c in CATEGORIES}
    applied: dict[str, list[str]] = {}
    for c in CATEGORIES:  # the spec requires it for every model: what each category read
        kinds = ["text"] if texts and categories[c] is not None else []
        if images and c in WITH_IMAGES:
            kinds.append("image")
        applied[c] = kinds
    result: Json = {
        "flagged": bool(hit),
        "categories": categories,
        "category_scores": scores,
        "category_applied_input_types": applied,
    }
    return result


def _inputs(value: Any, model: str) -> list[tuple[list[str], int]]:
    """``input`` as (texts, image count) per result; a 400 naming the part that is wrong."""
    if isinstance(value, str):
        return [([value], 0)]
    if not isinstance(value, list) or not value:
        raise params.invalid("input", "must be a string, an array of strings, or a non-empty array of parts.")
    if all(isinstance(item, str) for item in value):
        return [([item], 0) for item in value]
    texts: list[str] = []
    images = 0
    for i, part in enumerate(value):
        where = f"input[{i}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise params.invalid(f"{where}.text", "must be a string.")
            texts.append(part["text"])
        elif kind == "image_url":
            image = part.get("image_url")
            if not isinstance(image, dict) or not isinstance(image.get("url"), str):
                raise params.invalid(f"{where}.image_url.url", "must be a string.")
            images += 1
        else:
            raise params.invalid(where, "must be a string, or a part of type 'text' or 'image_url' (not mixed).")
    if images and model in TEXT_MODELS:
        raise InvalidRequest(
            f"The model '{model}' does not accept images: use an omni moderation model.", param="input"
        )
    return [(texts, images)]


async def create(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    _, data = await json_body(request)
    data = params.prepare(data, ctx.profile_of(request.scope), "chat", strict=False)  # extra_body only
    model = data.get("model", DEFAULT_MODEL)
    if model is None:
        model = DEFAULT_MODEL
    if not isinstance(model, str) or not model:
        raise params.invalid("model", "must be a non-empty string.")
    if "input" not in data:
        raise InvalidRequest("Missing required parameter: 'input'.", param="input")
    inputs = _inputs(data["input"], model)
    if len(inputs) > ctx.limits.list_entries:
        raise params.invalid("input", f"at most {ctx.limits.list_entries} inputs (--max-list).")
    body = {
        "id": seeding.make_id("modr-", seeding.canonical(data), 0),
        "model": model,
        "results": [classify(texts, images, model) for texts, images in inputs],
    }
    return Response(dumps(body), media_type="application/json")
