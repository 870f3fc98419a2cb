"""The images endpoints' wire models, and the rules each image model adds to them.

The pydantic models check types and ranges, as the other families' do. What depends on the model
— which sizes, how long a prompt, how many images, which parameters exist at all — is checked by
the ``plan_*`` functions, which turn a valid body into an :class:`ImagePlan`, the frozen record
the handler paints from; :func:`check_image` and :func:`check_mask` judge the uploaded files
(read from their headers by :func:`mockserver.media.vision.read_image`). Models fall into families:
``dall-e-2``, ``dall-e-3``, and the GPT image models (``gpt-image-1``, ``gpt-image-1.5``,
``gpt-image-1-mini``, ``chatgpt-image-latest``, and any other id); ``gpt-image-2*`` also takes
free ``WIDTHxHEIGHT`` sizes within OpenAI's limits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import Field

from mockserver.errors import InvalidRequest
from mockserver.media.painting import png_has_alpha
from mockserver.media.vision import ImageInfo, read_image
from mockserver.schemas.common import WireModel

__all__ = [
    "DALL_E_2", "DALL_E_3", "DEFAULT_GPT_MODEL", "GPT_IMAGE", "EditRequest", "ImageFamily", "ImagePlan", "ImageRequest",
    "VariationRequest", "check_image", "check_mask", "edit_family", "family_of", "plan_edit", "plan_generation",
    "plan_variation",
]  # fmt: skip

Quality = Literal["standard", "hd", "low", "medium", "high", "auto"]
ResponseFormat = Literal["url", "b64_json"]


class _ImageFields(WireModel):
    model: str | None = None
    n: int | None = Field(None, ge=1, le=10)
    size: str | None = None
    response_format: ResponseFormat | None = None
    user: str | None = None
    seed: int | None = None  # mockserver's extension: the same seed paints the same pictures


class VariationRequest(_ImageFields):
    """``POST /v1/images/variations`` (multipart; the ``image`` file is checked by the handler)."""


class _PromptFields(_ImageFields):
    prompt: str
    quality: Quality | None = None
    background: Literal["transparent", "opaque", "auto"] | None = None
    output_format: Literal["png", "jpeg", "webp"] | None = None
    output_compression: int | None = Field(None, ge=0, le=100)
    stream: bool | None = None
    partial_images: int | None = Field(None, ge=0, le=3)


class ImageRequest(_PromptFields):
    """``POST /v1/images/generations`` (JSON)."""

    style: Literal["vivid", "natural"] | None = None
    moderation: Literal["low", "auto"] | None = None


class EditRequest(_PromptFields):
    """``POST /v1/images/edits`` (multipart; ``image`` and ``mask`` files are checked by the handler)."""

    input_fidelity: Literal["high", "low"] | None = None


@dataclass(frozen=True, slots=True)
class ImageFamily:
    """What a family of image models accepts, as OpenAI documents it."""

    name: str
    max_prompt: int  # characters
    sizes: tuple[str, ...]
    max_n: int
    qualities: tuple[str, ...]
    gpt: bool = False  # b64_json only, token usage, PNG/JPEG/WebP inputs, the GPT-only parameters
    free_sizes: bool = False  # WIDTHxHEIGHT: multiples of 16, aspect within 1:3..3:1, ≤ 3840x2160


DALL_E_2 = ImageFamily("dall-e-2", 1000, ("256x256", "512x512", "1024x1024"), 10, ("standard", "auto"))
DALL_E_3 = ImageFamily("dall-e-3", 4000, ("1024x1024", "1792x1024", "1024x1792"), 1, ("standard", "hd", "auto"))
GPT_IMAGE = ImageFamily(
    "gpt-image", 32000, ("1024x1024", "1536x1024", "1024x1536", "auto"), 10, ("low", "medium", "high", "auto"), True
)
_GPT_IMAGE_2 = replace(GPT_IMAGE, free_sizes=True)
# The spec's default for edits, and our pick when a generation without `model` uses a GPT-only parameter.
DEFAULT_GPT_MODEL = "gpt-image-1.5"

_GPT_ONLY = ("background", "moderation", "output_format", "output_compression", "partial_images", "input_fidelity")
_MAX_FREE_PIXELS = 3840 * 2160
_MB = 1024 * 1024


def family_of(model: str) -> ImageFamily:
    if model == "dall-e-2":
        return DALL_E_2
    if model == "dall-e-3":
        return DALL_E_3
    return _GPT_IMAGE_2 if model.startswith("gpt-image-2") else GPT_IMAGE


@dataclass(frozen=True, slots=True)
class ImagePlan:
    """What to paint and how to answer: every default resolved, every rule checked."""

    model: str
    family: ImageFamily
    prompt: str
    n: int
    width: int
    height: int
    response_format: ResponseFormat
    quality: str  # as reported: standard/hd for DALL·E, low/medium/high for GPT image models
    style: str | None  # dall-e-3: vivid or natural
    background: str | None  # GPT image models: transparent or opaque

    @property
    def size(self) -> str:
        return f"{self.width}x{self.height}"


def plan_generation(body: ImageRequest) -> ImagePlan:
    model = body.model
    if model is None:  # the spec: dall-e-2, unless a parameter only the GPT image models know is used
        gpt_only = any(getattr(body, f, None) is not None for f in _GPT_ONLY)
        model = DEFAULT_GPT_MODEL if gpt_only or body.quality in ("low", "medium", "high") else "dall-e-2"
    return _plan(body, model, family_of(model), body.prompt, body.style, None)


def edit_family(body: EditRequest) -> ImageFamily:
    """The family of the model asked to edit; dall-e-3 cannot."""
    model = body.model or DEFAULT_GPT_MODEL
    family = family_of(model)
    if family is DALL_E_3:
        raise _unsupported_model(model, "image edits", "dall-e-2 or a GPT image model")
    return family


def plan_edit(body: EditRequest, image_size: tuple[int, int]) -> ImagePlan:
    """``image_size`` is the (first) input image's: ``size: auto`` follows its orientation."""
    return _plan(body, body.model or DEFAULT_GPT_MODEL, edit_family(body), body.prompt, None, image_size)


def plan_variation(body: VariationRequest) -> ImagePlan:
    model = body.model or "dall-e-2"
    if model != "dall-e-2":
        raise _unsupported_model(model, "image variations", "dall-e-2")
    return _plan(body, model, DALL_E_2, "", None, None)


def _plan(
    body: _ImageFields,
    model: str,
    family: ImageFamily,
    prompt: str,
    style: str | None,
    auto_from: tuple[int, int] | None,
) -> ImagePlan:
    if getattr(body, "stream", None):
        raise InvalidRequest(
            "mockserver does not stream images: leave 'stream' unset or false.",
            param="stream",
            code="unsupported_value",
        )
    _refuse_foreign(body, family)
    if isinstance(body, _PromptFields):
        _check_prompt(prompt, family)
    n = body.n if body.n is not None else 1
    if n > family.max_n:
        raise InvalidRequest(
            f"Invalid value for 'n': {family.name} supports only n=1, got n={n}.", param="n", code="invalid_value"
        )
    width, height = _size(body.size, family, auto_from)
    quality = getattr(body, "quality", None) or "auto"
    if quality not in family.qualities:
        raise _not_one_of("quality", quality, family)
    if quality == "auto":  # report what "auto" chose; OpenAI does not say, so: each family's best
        quality = "high" if family.gpt else "standard"
    background = None
    if family.gpt:
        output_format = getattr(body, "output_format", None) or "png"
        if output_format != "png":
            raise InvalidRequest(
                f"Invalid value for 'output_format': mockserver encodes PNG only, so {output_format!r} is not "
                "supported here; use 'png' or leave it unset.",
                param="output_format",
                code="unsupported_value",
            )
        background = "transparent" if getattr(body, "background", None) == "transparent" else "opaque"
    if family is DALL_E_3:
        style = style or "vivid"
    fmt: ResponseFormat = "b64_json" if family.gpt else body.response_format or "url"
    return ImagePlan(model, family, prompt, n, width, height, fmt, quality, style, background)


def _refuse_foreign(body: _ImageFields, family: ImageFamily) -> None:
    """A parameter of another family is an unknown parameter, as OpenAI answers ``response_format``
    sent to a GPT image model."""
    if family.gpt:
        foreign: tuple[str, ...] = ("response_format", "style")
    else:
        foreign = _GPT_ONLY if family is DALL_E_3 else (*_GPT_ONLY, "style")
    for name in foreign:
        if getattr(body, name, None) is not None:
            owner = {"style": "dall-e-3", "response_format": "dall-e-2 and dall-e-3"}.get(name, "the GPT image models")
            raise InvalidRequest(
                f"Unknown parameter: '{name}'. ('{name}' is only supported for {owner}, not {family.name}.)",
                param=name,
                code="unknown_parameter",
            )


def _check_prompt(prompt: str, family: ImageFamily) -> None:
    if not prompt:
        raise InvalidRequest(
            "Invalid 'prompt': string too short. Expected a string with minimum length 1, but got an empty string "
            "instead.",
            param="prompt",
            code="string_below_min_length",
        )
    if len(prompt) > family.max_prompt:
        raise InvalidRequest(
            f"Invalid 'prompt': string too long. Expected a string with maximum length {family.max_prompt}, but got "
            f"a string with length {len(prompt)} instead.",
            param="prompt",
            code="string_above_max_length",
        )
    try:
        prompt.encode()  # the picture is keyed and themed by the prompt's bytes
    except UnicodeEncodeError:  # JSON may escape half a surrogate pair ("\ud800"): no bytes have it
        raise InvalidRequest(
            "Invalid value for 'prompt': it is not valid Unicode (a lone surrogate escape such as \\ud800).",
            param="prompt",
            code="invalid_value",
        ) from None


def _size(size: str | None, family: ImageFamily, auto_from: tuple[int, int] | None) -> tuple[int, int]:
    chosen = size or ("auto" if family.gpt else "1024x1024")
    if chosen == "auto" and family.gpt:
        if auto_from is None or auto_from[0] == auto_from[1]:
            return 1024, 1024
        return (1536, 1024) if auto_from[0] > auto_from[1] else (1024, 1536)
    match = re.fullmatch(r"([1-9][0-9]{0,4})x([1-9][0-9]{0,4})", chosen)
    if chosen in family.sizes and match:
        return int(match[1]), int(match[2])
    if family.free_sizes and match:
        width, height = int(match[1]), int(match[2])
        if (
            width % 16 == 0
            and height % 16 == 0
            and max(width, height) <= 3 * min(width, height)
            and max(width, height) <= 3840
            and width * height <= _MAX_FREE_PIXELS
        ):
            return width, height
        raise InvalidRequest(
            f"Invalid value for 'size': {chosen!r}. Width and height must be multiples of 16, the aspect ratio "
            "between 1:3 and 3:1, and the size at most 3840x2160.",
            param="size",
            code="invalid_size",
        )
    raise _not_one_of("size", chosen, family, code="invalid_size")


def _not_one_of(param: str, value: str, family: ImageFamily, code: str = "invalid_value") -> InvalidRequest:
    allowed = family.sizes if param == "size" else family.qualities
    listed = ", ".join(f"'{a}'" for a in allowed)
    return InvalidRequest(
        f"Invalid value for '{param}': {value!r} is not supported by {family.name}. Supported values are: {listed}.",
        param=param,
        code=code,
    )


def _unsupported_model(model: str, what: str, supported: str) -> InvalidRequest:
    return InvalidRequest(
        f"Invalid value for 'model': {model!r} does not support {what}; use {supported}.",
        param="model",
        code="invalid_value",
    )


def check_image(data: bytes, param: str, family: ImageFamily) -> ImageInfo:
    """An input image as ``family`` takes it: DALL·E 2 a square PNG under 4 MB, the GPT image
    models PNG, JPEG or WebP under 50 MB."""
    try:
        info = read_image(data)
    except ValueError as exc:
        raise InvalidRequest(f"Invalid image in '{param}': {exc}.", param=param, code="invalid_image_format") from None
    allowed = ("image/png", "image/jpeg", "image/webp") if family.gpt else ("image/png",)
    if info.media_type not in allowed:
        kinds = "a PNG, JPEG or WebP" if family.gpt else "a PNG"
        raise InvalidRequest(
            f"Invalid image in '{param}': {family.name} takes {kinds} image, got {info.media_type}.",
            param=param,
            code="invalid_image_format",
        )
    limit = 50 if family.gpt else 4
    if len(data) >= limit * _MB:
        raise InvalidRequest(
            f"Invalid image in '{param}': it must be less than {limit} MB, got {len(data) / _MB:.1f} MB.",
            param=param,
            code="image_too_large",
        )
    if not family.gpt and info.width != info.height:
        raise InvalidRequest(
            f"Invalid image in '{param}': {family.name} takes square images, got {info.width}x{info.height}.",
            param=param,
            code="invalid_image_format",
        )
    return info


def check_mask(data: bytes, size: tuple[int, int]) -> None:
    """A PNG under 4 MB, with transparency (where to edit), the size of the (first) image."""
    try:
        info = read_image(data)
    except ValueError as exc:
        raise InvalidRequest(f"Invalid image in 'mask': {exc}.", param="mask", code="invalid_image_format") from None
    problem = None
    if info.media_type != "image/png":
        problem = f"it must be a PNG, got {info.media_type}"
    elif len(data) >= 4 * _MB:
        problem = "it must be less than 4 MB"
    elif (info.width, info.height) != size:
        problem = f"it must have the same size as the image ({size[0]}x{size[1]}), got {info.width}x{info.height}"
    elif not png_has_alpha(data):
        problem = "it has no alpha channel (its fully transparent areas say where to edit)"
    if problem is not None:
        raise InvalidRequest(f"Invalid image in 'mask': {problem}.", param="mask", code="invalid_image_format")
