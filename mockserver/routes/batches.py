"""``/v1/batches``: create, retrieve, cancel, list. The lifecycle is
:mod:`mockserver.batches.runner`'s; here the request is read and judged.

A batch's lines are sent with the creating request's credentials and session (so bearer keys,
a session's rules and its journal apply to them as to the client's own requests). Two headers
of the creating request steer its lines, as ``x-mockserver-fault`` steers one request:

* ``x-mockserver-line-fault``: a fault spec applied to *every line* (``http.500@p=0.2`` fails a
  seeded fifth of them); ``x-mockserver-fault`` itself would hit the create request.
* ``x-mockserver-batch-expire: N``: the batch expires after ``N`` lines have run (an expired
  batch on demand, without waiting out its 24 h window).
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.batches.desk import Batches
from mockserver.batches.lines import ENDPOINTS
from mockserver.context import ServerContext
from mockserver.errors import APIError, InvalidRequest
from mockserver.faults.catalogue import FaultError
from mockserver.faults.catalogue import parse as parse_faults
from mockserver.http.body import json_body
from mockserver.routes import params
from mockserver.routes.files import json_response, limit_of, listing
from mockserver.wire import headers as h

__all__ = ["LINE_FAULT", "model_check", "routes"]

LINE_FAULT = b"x-mockserver-line-fault"
EXPIRE = b"x-mockserver-batch-expire"
# The creating request's headers its lines carry.
_CARRIED = frozenset({b"authorization", b"api-key", b"x-api-key", h.SESSION, h.CASSETTE})
MAX_PAIRS, MAX_KEY, MAX_VALUE = 16, 64, 512  # OpenAI's metadata limits


def model_check(ctx: ServerContext) -> Callable[[str], str | None]:
    """What a direct request would say of a line's model (None: it is served)."""

    def problem(model: str) -> str | None:
        try:
            ctx.options.models.context_window(model, ctx.profile)
        except APIError as exc:
            return exc.message
        return None

    return problem


def _batches(request: Request) -> Batches:
    batches: Batches = request.app.state.batches
    return batches


def _metadata(value: object) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise params.invalid("metadata", "expected an object of string values.")
    if len(value) > MAX_PAIRS:
        raise params.invalid("metadata", f"at most {MAX_PAIRS} pairs.")
    for key, item in value.items():
        if len(key) > MAX_KEY or len(item) > MAX_VALUE:
            raise params.invalid("metadata", f"keys are at most {MAX_KEY} characters, values {MAX_VALUE}.")
    return dict(value)


async def create(request: Request) -> Response:
    _, body = await json_body(request)
    input_file_id = body.get("input_file_id")
    if input_file_id is None:
        raise InvalidRequest("Missing required parameter: 'input_file_id'.", param="input_file_id")
    if not isinstance(input_file_id, str):
        raise params.invalid("input_file_id", "expected a file id string.")
    endpoint = body.get("endpoint")
    if endpoint is None:
        raise InvalidRequest("Missing required parameter: 'endpoint'.", param="endpoint")
    if not isinstance(endpoint, str) or endpoint not in ENDPOINTS:
        raise params.invalid("endpoint", f"{endpoint!r} is not one of {', '.join(ENDPOINTS)}.")
    window = body.get("completion_window")
    if window is None:
        raise InvalidRequest("Missing required parameter: 'completion_window'.", param="completion_window")
    if window != "24h":
        raise params.invalid("completion_window", f"{window!r} is not '24h'.")
    metadata = _metadata(body.get("metadata"))
    carried = [(k, v) for k, v in request.scope["headers"] if k in _CARRIED]
    line_fault = h.header(request.scope["headers"], LINE_FAULT)
    if line_fault:
        try:
            parse_faults(line_fault)
        except FaultError as exc:
            raise InvalidRequest(str(exc), param=h.name(LINE_FAULT)) from None
        carried.append((h.FAULT, line_fault.encode("latin-1")))
    expire_after = None
    raw_expire = h.header(request.scope["headers"], EXPIRE)
    if raw_expire is not None:
        try:
            expire_after = int(raw_expire)
        except ValueError:
            expire_after = -1
        if expire_after < 0:
            raise InvalidRequest(
                f"Invalid value for '{h.name(EXPIRE)}': {raw_expire!r} is not a count of lines.", param=h.name(EXPIRE)
            )
    batch = await _batches(request).create(str(input_file_id), str(endpoint), metadata, carried, expire_after)
    return json_response(batch)


async def retrieve(request: Request) -> Response:
    return json_response(await _batches(request).get(request.path_params["batch_id"]))


async def cancel(request: Request) -> Response:
    return json_response(await _batches(request).cancel(request.path_params["batch_id"]))


async def list_batches(request: Request) -> Response:
    data, more = await _batches(request).page(limit_of(request, 20, 100), request.query_params.get("after"))
    page = listing(data, more)
    if not data:  # ListBatchesResponse: the ids are optional strings, so an empty page has none
        del page["first_id"], page["last_id"]
    return json_response(page)


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/batches", create, methods=["POST"]),
        Route("/v1/batches", list_batches, methods=["GET"]),
        Route("/v1/batches/{batch_id}", retrieve, methods=["GET"]),
        Route("/v1/batches/{batch_id}/cancel", cancel, methods=["POST"]),
    ]
