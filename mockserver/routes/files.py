"""``/v1/files``: upload (multipart), list, retrieve, read the exact bytes back, delete.

A ``batch`` file that is not JSONL at all is refused here, at upload (400 naming ``file``), as
OpenAI does; a bad line further down fails the batch that runs it, at validation.
"""

from __future__ import annotations

from typing import Any, Literal

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.batches.lines import not_jsonl
from mockserver.errors import InvalidRequest
from mockserver.files.store import PURPOSES, FileStore
from mockserver.routes import params
from mockserver.wire.json import Json, dumps

__all__ = ["check_batch_file", "form_of", "json_response", "limit_of", "routes"]

# FileExpirationAfter: seconds between an hour and 30 days, counted from created_at.
MIN_EXPIRY, MAX_EXPIRY = 3600, 2_592_000


def json_response(obj: Any) -> Response:
    return Response(dumps(obj), media_type="application/json")


def listing(data: list[Json], has_more: bool) -> Json:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


def files_of(request: Request) -> FileStore:
    store: FileStore = request.app.state.files
    return store


async def form_of(request: Request, file_fields: tuple[str, ...]) -> tuple[dict[str, str], dict[str, UploadFile]]:
    """A multipart body's text fields and its files (each field once)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "multipart/form-data":
        raise InvalidRequest(f"This endpoint takes multipart/form-data, not {media or 'no body'}.")
    try:
        form = await request.form(max_part_size=64 * 1024 * 1024)
    except HTTPException as exc:
        raise InvalidRequest(f"Could not parse the multipart body: {exc.detail}") from None
    fields: dict[str, str] = {}
    files: dict[str, UploadFile] = {}
    for name, value in form.multi_items():
        if isinstance(value, UploadFile):
            files[name] = value
        elif name in file_fields:
            raise InvalidRequest(f"Invalid value for '{name}': expected a file upload.", param=name)
        else:
            fields[name] = value
    return fields, files


async def check_batch_file(data: bytes, param: str) -> None:
    """A file for the Batch API must be JSONL (its lines are judged when a batch runs it)."""
    why = not_jsonl(data)
    if why is not None:
        raise InvalidRequest(
            f"Invalid file format for Batch API: {why} A batch file is JSONL, one request per line.",
            param=param,
            code="invalid_file_format",
        )


def limit_of(request: Request, default: int, most: int) -> int:
    raw = request.query_params.get("limit", str(default))
    try:
        limit = int(raw)
    except ValueError:
        raise params.invalid("limit", f"'{raw}' is not an integer.") from None
    if not 1 <= limit <= most:
        raise params.invalid("limit", f"{limit} is not between 1 and {most}.")
    return limit


def _expiry(fields: dict[str, str]) -> int | None:
    anchor, seconds = fields.get("expires_after[anchor]"), fields.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return None
    if anchor != "created_at":
        raise params.invalid("expires_after.anchor", f"{anchor!r} is not 'created_at'.")
    try:
        value = int(seconds or "")
    except ValueError:
        raise params.invalid("expires_after.seconds", f"{seconds!r} is not an integer.") from None
    if not MIN_EXPIRY <= value <= MAX_EXPIRY:
        raise params.invalid("expires_after.seconds", f"{value} is not between {MIN_EXPIRY} and {MAX_EXPIRY}.")
    return value


def purpose_of(value: object, choices: tuple[str, ...] = PURPOSES) -> str:
    if value is None:
        raise InvalidRequest("Missing required parameter: 'purpose'.", param="purpose")
    if value not in choices:
        raise params.invalid("purpose", f"{value!r} is not one of {', '.join(choices)}.")
    return str(value)


async def create(request: Request) -> Response:
    fields, files = await form_of(request, ("file",))
    try:
        purpose = purpose_of(fields.get("purpose"))
        upload = files.get("file")
        if upload is None:
            raise InvalidRequest("Missing required parameter: 'file'.", param="file")
        expires_after = _expiry(fields)
        data = await upload.read()
        if purpose == "batch":
            await check_batch_file(data, "file")
        filename = upload.filename or "file"
    finally:
        for item in files.values():
            await item.close()
    return json_response(await files_of(request).create(data, filename, purpose, expires_after))


async def list_files(request: Request) -> Response:
    order = request.query_params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise params.invalid("order", f"'{order}' is not one of asc, desc.")
    ordered: Literal["asc", "desc"] = "asc" if order == "asc" else "desc"
    purpose = request.query_params.get("purpose")
    after = request.query_params.get("after")
    data, more = await files_of(request).page(purpose, limit_of(request, 10_000, 10_000), ordered, after)
    return json_response(listing(data, more))


async def retrieve(request: Request) -> Response:
    return json_response(await files_of(request).get(request.path_params["file_id"]))


async def content(request: Request) -> Response:
    data = await files_of(request).content(request.path_params["file_id"])
    return Response(data, media_type="application/octet-stream")


async def delete(request: Request) -> Response:
    return json_response(await files_of(request).delete(request.path_params["file_id"]))


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/files", create, methods=["POST"]),
        Route("/v1/files", list_files, methods=["GET"]),
        Route("/v1/files/{file_id}", retrieve, methods=["GET"]),
        Route("/v1/files/{file_id}", delete, methods=["DELETE"]),
        Route("/v1/files/{file_id}/content", content, methods=["GET"]),
    ]
