"""The images endpoints: generations (JSON), edits (multipart, or JSON with images by reference), variations
(multipart), and the images served by URL.

Pictures come from :func:`mockserver.media.painting.paint`, keyed by the request's content, its seed (the
body's ``seed``, else one derived from the canonical body as for text) and the image's index, plus
the input files' bytes for edits and variations (for an image referenced by URL or file id, which is never
fetched, the reference itself). ``response_format`` and ``n`` are left out of the
derived seed, so the ``url`` and ``b64_json`` twins of a request, and its first image whatever the
``n``, are the same picture. Images answered as URLs are kept in a bounded in-memory store
(:class:`ImageStore`, one per app) and served at ``GET /images/{id}.png``, outside ``/v1``; the id
is a hash of the PNG, so the same request gets the same URL. On a shared state (``--state``)
they are kept in the state instead (``image:<id>``, for an hour, as OpenAI's URLs last), so any
process of a fleet serves the URL another one answered.
"""

from __future__ import annotations

import base64
import hashlib
from collections import OrderedDict
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest, NotFound
from mockserver.http.body import json_body
from mockserver.media.painting import paint
from mockserver.media.vision import data_url_bytes, image_tokens
from mockserver.routes import params
from mockserver.schemas.common import WireModel, validated
from mockserver.schemas.images import (
    DALL_E_3,
    EditRequest,
    ImagePlan,
    ImageRequest,
    VariationRequest,
    check_image,
    check_mask,
    edit_family,
    plan_edit,
    plan_generation,
    plan_variation,
)
from mockserver.spine import seeding
from mockserver.wire import headers as h
from mockserver.wire.json import dumps

__all__ = ["ImageStore", "routes"]

_MB = 1024 * 1024  # the store's budget
_STATE_KEY = "mockserver_images"
_INT_FIELDS = frozenset({"n", "seed", "output_compression", "partial_images"})  # multipart sends them as text
# Output tokens per image of the GPT image models, by quality, for 1024x1024, 1024x1536 and 1536x1024
# (OpenAI's published table); other sizes are priced in proportion to their pixels.
_OUTPUT_TOKENS = {"low": (272, 408, 400), "medium": (1056, 1584, 1568), "high": (4160, 6240, 6208)}
_LOOKS = ("a flat-colour landscape poster", "a layered mountain vista", "a quiet lakeside scene at the horizon")

M = TypeVar("M", bound=WireModel)


class ImageStore:
    """The images answered as URLs: the latest ``capacity`` of them, within ``max_bytes``; older
    ones are dropped first (OpenAI's URLs expire too, after an hour)."""

    def __init__(self, capacity: int = 256, max_bytes: int = 64 * _MB) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._images: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0

    def put(self, png: bytes) -> str:
        """Keep ``png``; its id is a hash of its bytes, so the same picture keeps the same URL."""
        image_id = _image_id(png)
        if image_id in self._images:
            self._images.move_to_end(image_id)
            return image_id
        self._images[image_id] = png
        self._bytes += len(png)
        while len(self._images) > self.capacity or (self._bytes > self.max_bytes and len(self._images) > 1):
            _, dropped = self._images.popitem(last=False)
            self._bytes -= len(dropped)
        return image_id

    def get(self, image_id: str) -> bytes | None:
        return self._images.get(image_id)


def image_store(app: Starlette) -> ImageStore:
    """The app's store, made on first use (handlers run on the event loop: no race)."""
    store: ImageStore | None = getattr(app.state, _STATE_KEY, None)
    if store is None:
        store = ImageStore()
        setattr(app.state, _STATE_KEY, store)
    return store


async def generations(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    _, raw = await json_body(request)
    # prepare() for its extra_body lifting only: no profile documents image fields, see _strict.
    data = _strict(params.prepare(raw, ctx.profile_of(request.scope), "chat", strict=False), ImageRequest, request)
    body = validated(ImageRequest, data)
    plan = plan_generation(body)
    seed = _seed(body.seed, data, ctx)
    key = _key(b"generations", plan, seed)
    return await _answer(request, ctx, plan, seed, key, plan.prompt, 0)


async def edits(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    if _media_type(request) == "application/json":
        return await _json_edits(request, ctx)
    fields, files = await _form(request)
    images = files.pop("image", []) + files.pop("image[]", [])
    masks = files.pop("mask", [])
    fields = _strict(fields, EditRequest, request, files)
    body = validated(EditRequest, fields)
    if not images:
        raise InvalidRequest("Missing required parameter: 'image'.", param="image")
    family = edit_family(body)  # first: a model that cannot edit is named before its images are judged
    if len(images) > (16 if family.gpt else 1):
        raise InvalidRequest(
            f"Invalid value for 'image': {family.name} takes {'up to 16 images' if family.gpt else 'one image'}, "
            f"got {len(images)}.",
            param="image",
        )
    single = len(images) == 1
    infos = [check_image(data, "image" if single else f"image[{i}]", family) for i, data in enumerate(images)]
    if len(masks) > 1:
        raise InvalidRequest("Invalid value for 'mask': send one mask.", param="mask")
    if masks:
        check_mask(masks[0], (infos[0].width, infos[0].height))
    plan = plan_edit(body, (infos[0].width, infos[0].height))
    hashes = [hashlib.sha256(data).hexdigest() for data in images + masks]
    seed = _seed(body.seed, {**fields, "image": hashes[: len(images)], "mask": hashes[len(images) :]}, ctx)
    key = _key(b"edits", plan, seed, *hashes)
    image_input = sum(image_tokens(i.width, i.height, "high") for i in infos)
    return await _answer(request, ctx, plan, seed, key, plan.prompt, image_input)


async def _json_edits(request: Request, ctx: ServerContext) -> Response:
    """The spec's JSON form of an edit (GPT image models only): ``images`` and ``mask`` are
    references — ``{"image_url": …}`` (a base64 ``data:`` URL is decoded and checked as an
    upload is; an http(s) URL is never fetched) or ``{"file_id": …}`` (accepted, not read)."""
    _, raw = await json_body(request)
    data = dict(raw)
    refs = data.pop("images", None)
    mask = data.pop("mask", None)
    fields = _strict(data, EditRequest, request)
    body = validated(EditRequest, fields)
    family = edit_family(body)
    if not family.gpt:
        raise InvalidRequest(
            f"Invalid value for 'model': JSON image edits take a GPT image model; {family.name} edits are "
            "multipart/form-data uploads.",
            param="model",
        )
    if not isinstance(refs, list) or not refs:
        raise InvalidRequest("Missing required parameter: 'images' (a list of image references).", param="images")
    if len(refs) > 16:
        raise InvalidRequest(f"Invalid value for 'images': up to 16 images, got {len(refs)}.", param="images")
    images = [_reference(ref, f"images[{i}]") for i, ref in enumerate(refs)]
    infos = [check_image(ref, f"images[{i}]", family) for i, ref in enumerate(images) if isinstance(ref, bytes)]
    # An image by URL or file id is never read: its size is the default square's.
    size = (infos[0].width, infos[0].height) if infos and isinstance(images[0], bytes) else (1024, 1024)
    masked = _reference(mask, "mask") if mask is not None else None
    if isinstance(masked, bytes):
        check_mask(masked, size)
    plan = plan_edit(body, size)
    inputs = [*images, *([masked] if masked is not None else [])]
    hashes = [hashlib.sha256(ref if isinstance(ref, bytes) else ref.encode()).hexdigest() for ref in inputs]
    seed = _seed(body.seed, {**fields, "image": hashes[: len(images)], "mask": hashes[len(images) :]}, ctx)
    key = _key(b"edits", plan, seed, *hashes)
    image_input = sum(image_tokens(i.width, i.height, "high") for i in infos)
    image_input += image_tokens(*size, "high") * sum(not isinstance(ref, bytes) for ref in images)
    return await _answer(request, ctx, plan, seed, key, plan.prompt, image_input)


def _reference(ref: Any, param: str) -> bytes | str:
    """An ``ImageRefParam``: the bytes of a data URL, else the URL or file id itself."""
    if not isinstance(ref, dict) or len(ref) != 1 or not ({"image_url", "file_id"} & set(ref)):
        raise InvalidRequest(
            f"Invalid value for '{param}': an image reference is an object with exactly one of "
            "'image_url' (a URL or a base64 data URL) or 'file_id'.",
            param=param,
        )
    name, value = next(iter(ref.items()))
    if not isinstance(value, str) or not value:
        raise InvalidRequest(
            f"Invalid value for '{param}.{name}': expected a non-empty string.", param=f"{param}.{name}"
        )
    if name == "image_url" and value[:5].lower() == "data:":
        try:
            return data_url_bytes(value)
        except ValueError as exc:
            raise InvalidRequest(
                f"Invalid value for '{param}.image_url': {exc}.",
                param=f"{param}.image_url",
                code="invalid_image_format",
            ) from None
    if name == "image_url" and not value.lower().startswith(("http://", "https://")):
        raise InvalidRequest(
            f"Invalid value for '{param}.image_url': expected an http(s) URL or a base64 data URL.",
            param=f"{param}.image_url",
        )
    return f"{name}:{value}"


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").partition(";")[0].strip().lower()


async def variations(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    fields, files = await _form(request)
    images = files.pop("image", [])
    fields = _strict(fields, VariationRequest, request, files)
    body = validated(VariationRequest, fields)
    plan = plan_variation(body)  # dall-e-2 or a 400 naming 'model'
    if len(images) != 1:
        raise InvalidRequest(
            "Missing required parameter: 'image'." if not images else "Invalid value for 'image': send one image.",
            param="image",
        )
    check_image(images[0], "image", plan.family)
    digest = hashlib.sha256(images[0]).hexdigest()
    seed = _seed(body.seed, {**fields, "image": digest}, ctx)
    # The theme is the input image: variations of one image share its colours, and differ in layout.
    return await _answer(request, ctx, plan, seed, _key(b"variations", plan, seed, digest), images[0], 0)


IMAGE_TTL = 3600.0  # seconds an image served by URL is kept in a shared state (OpenAI's URLs: an hour)


def _image_id(png: bytes) -> str:
    return "img-" + hashlib.sha256(png).hexdigest()[:32]


async def _keep(request: Request, ctx: ServerContext, png: bytes) -> str:
    """Keep an image answered by URL: in the shared state when there is one, else in this app's store."""
    if ctx.state.shared:
        image_id = _image_id(png)
        await ctx.state.put(f"image:{image_id}", png, ttl=IMAGE_TTL)
        return image_id
    return image_store(request.app).put(png)


async def serve_image(request: Request) -> Response:
    image_id: str = request.path_params["image_id"]
    ctx: ServerContext = request.app.state.ctx
    if ctx.state.shared:
        png = await ctx.state.get(f"image:{image_id}")
        kept = "kept for an hour"
    else:
        png = image_store(request.app).get(image_id)
        kept = f"older than the last {image_store(request.app).capacity} images kept"
    if png is None:
        raise NotFound(
            f"No image '{image_id}': it was never generated here, or is {kept}.",
            code="image_not_found",
        )
    return Response(png, media_type="image/png")


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/images/generations", generations, methods=["POST"]),
        Route("/v1/images/edits", edits, methods=["POST"]),
        Route("/v1/images/variations", variations, methods=["POST"]),
        Route("/images/{image_id}.png", serve_image, methods=["GET"], name="mockserver_image"),
    ]


async def _answer(
    request: Request, ctx: ServerContext, plan: ImagePlan, seed: int, key: bytes, theme: str | bytes, image_input: int
) -> Response:
    pngs = await run_in_threadpool(_paint_all, plan, key, theme)  # tens of ms each: off the event loop
    data: list[dict[str, Any]] = []
    for index, png in enumerate(pngs):
        if plan.response_format == "url":
            image_id = await _keep(request, ctx, png)
            item: dict[str, Any] = {"url": str(request.url_for("mockserver_image", image_id=image_id))}
        else:
            item = {"b64_json": base64.b64encode(png).decode("ascii")}
        if plan.family is DALL_E_3:
            item["revised_prompt"] = _revise(plan, seeding.digest(key, index))
        data.append(item)
    answer: dict[str, Any] = {"created": int(ctx.clock.now()), "data": data}
    if plan.family.gpt:
        answer.update(
            background=plan.background,
            output_format="png",
            size=plan.size,
            quality=plan.quality,
            usage=_usage(plan, image_input),
        )
    return Response(dumps(answer), media_type="application/json", headers={h.name(h.SEED): str(seed)})


def _paint_all(plan: ImagePlan, key: bytes, theme: str | bytes) -> list[bytes]:
    return [
        paint(
            plan.width,
            plan.height,
            key=seeding.digest(key, index),
            theme=theme,
            transparent=plan.background == "transparent",
            vivid=plan.style != "natural",
        )
        for index in range(plan.n)
    ]


def _key(endpoint: bytes, plan: ImagePlan, seed: int, *inputs: str) -> bytes:
    """What a picture depends on: the resolved request (not how it was spelled), the seed, the inputs."""
    resolved = (plan.model, plan.prompt, plan.size, plan.quality, plan.style, plan.background)
    return seeding.digest(b"images", endpoint, *resolved, seed, *inputs)


def _seed(given: int | None, data: dict[str, Any], ctx: ServerContext) -> int:
    if given is not None:
        return given
    content = {k: v for k, v in data.items() if k not in ("response_format", "n")}
    return seeding.derive_seed(seeding.canonical(content), ctx.seed)


def _usage(plan: ImagePlan, image_input: int) -> dict[str, Any]:
    low, tall, wide = _OUTPUT_TOKENS[plan.quality]
    per_image = {"1024x1024": low, "1024x1536": tall, "1536x1024": wide}.get(plan.size)
    if per_image is None:
        per_image = round(low * plan.width * plan.height / (1024 * 1024))
    text = max(1, (len(plan.prompt) + 3) // 4)  # ~4 characters a token, OpenAI's rule of thumb
    output = per_image * plan.n
    return {
        "input_tokens": text + image_input,
        "input_tokens_details": {"text_tokens": text, "image_tokens": image_input},
        "output_tokens": output,
        "output_tokens_details": {"image_tokens": output, "text_tokens": 0},
        "total_tokens": text + image_input + output,
    }


def _revise(plan: ImagePlan, key: bytes) -> str:
    """DALL·E 3's ``revised_prompt``: the prompt, and what was actually drawn."""
    look = _LOOKS[key[0] % len(_LOOKS)]
    mood = "vivid, saturated" if plan.style == "vivid" else "natural, muted"
    return f"{plan.prompt.strip()} — depicted as {look} in {mood} colours, with a glowing sun over still water."


def _strict(
    data: dict[str, Any], model: type[WireModel], request: Request, files: dict[str, list[bytes]] | None = None
) -> dict[str, Any]:
    """With ``--strict``, what OpenAI does not document (``seed`` included: it is ours) is refused
    as OpenAI refuses it, or dropped for profiles that ignore unknown fields."""
    ctx: ServerContext = request.app.state.ctx
    if not ctx.options.strict:
        return data
    known = set(model.model_fields) - {"seed"}
    unknown = sorted(k for k in (*data, *(files or {})) if k not in known)
    if unknown and ctx.profile_of(request.scope).rejects_unknown:
        raise InvalidRequest(f"Unknown parameter: '{unknown[0]}'.", param=unknown[0], code="unknown_parameter")
    return {k: v for k, v in data.items() if k in known}


async def _form(request: Request) -> tuple[dict[str, Any], dict[str, list[bytes]]]:
    """The multipart body: its text fields (integers parsed) and its files by field name."""
    content_type = _media_type(request)
    if content_type != "multipart/form-data":
        raise InvalidRequest(
            f"This endpoint takes multipart/form-data (the image as a file upload), not {content_type or 'no body'}.",
        )
    try:
        form = await request.form()
    except HTTPException as exc:
        raise InvalidRequest(f"Could not parse the multipart body: {exc.detail}") from None
    fields: dict[str, Any] = {}
    files: dict[str, list[bytes]] = {}
    try:
        for name, value in form.multi_items():
            if isinstance(value, UploadFile):
                files.setdefault(name, []).append(await value.read())
            elif name in ("image", "image[]", "mask"):
                raise InvalidRequest(f"Invalid value for '{name}': expected a file upload.", param=name)
            else:
                fields[name] = _field(name, value)
    finally:
        await form.close()
    return fields, files


def _field(name: str, value: str) -> Any:
    if name == "stream":
        return value.lower() == "true"
    if name not in _INT_FIELDS:
        return value
    try:
        return int(value)
    except ValueError:
        raise InvalidRequest(f"Invalid value for '{name}': expected an integer, got {value!r}.", param=name) from None
