"""``/v1/uploads``: a file sent in parts — create, add parts, complete (order, byte count and
MD5 checked), cancel. Completing one yields a File (:mod:`mockserver.files.uploads`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.errors import InvalidRequest
from mockserver.files.uploads import Uploads
from mockserver.http.body import json_body
from mockserver.routes import params
from mockserver.routes.files import check_batch_file, form_of, json_response, purpose_of

__all__ = ["routes"]

# CreateUploadRequest's purposes.
PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")


def _uploads(request: Request) -> Uploads:
    uploads: Uploads = request.app.state.uploads
    return uploads


def _required(body: dict[str, object], name: str, kind: type) -> object:
    value = body.get(name)
    if value is None:
        raise InvalidRequest(f"Missing required parameter: '{name}'.", param=name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise params.invalid(name, f"expected {'an integer' if kind is int else 'a string'}.")
    return value


async def create(request: Request) -> Response:
    _, body = await json_body(request)
    filename = str(_required(body, "filename", str))
    purpose = purpose_of(body.get("purpose"), PURPOSES)
    size = _required(body, "bytes", int)
    assert isinstance(size, int)
    if size < 0:
        raise params.invalid("bytes", f"{size} is negative.")
    mime_type = str(_required(body, "mime_type", str))
    return json_response(await _uploads(request).create(filename, purpose, size, mime_type))


async def add_part(request: Request) -> Response:
    _, files = await form_of(request, ("data",))
    upload = files.get("data")
    if upload is None:
        raise InvalidRequest("Missing required parameter: 'data'.", param="data")
    try:
        data = await upload.read()
    finally:
        await upload.close()
    return json_response(await _uploads(request).add_part(request.path_params["upload_id"], data))


async def complete(request: Request) -> Response:
    _, body = await json_body(request)
    part_ids = body.get("part_ids")
    if part_ids is None:
        raise InvalidRequest("Missing required parameter: 'part_ids'.", param="part_ids")
    if not isinstance(part_ids, list) or not all(isinstance(p, str) for p in part_ids):
        raise params.invalid("part_ids", "expected a list of part ids.")
    md5 = body.get("md5")
    if md5 is not None and not isinstance(md5, str):
        raise params.invalid("md5", "expected a string.")
    upload_id = request.path_params["upload_id"]
    return json_response(await _uploads(request).complete(upload_id, part_ids, md5, _check))


async def _check(data: bytes, purpose: str) -> None:
    if purpose == "batch":
        await check_batch_file(data, "part_ids")


async def cancel(request: Request) -> Response:
    return json_response(await _uploads(request).cancel(request.path_params["upload_id"]))


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/uploads", create, methods=["POST"]),
        Route("/v1/uploads/{upload_id}/parts", add_part, methods=["POST"]),
        Route("/v1/uploads/{upload_id}/complete", complete, methods=["POST"]),
        Route("/v1/uploads/{upload_id}/cancel", cancel, methods=["POST"]),
    ]
