"""``GET /openapi.json``: the document :mod:`mockserver.routes.openapi` generates, served as is."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from mockserver.routes.openapi import document
from mockserver.wire.json import dumps


async def openapi_json(request: Request) -> Response:
    return Response(dumps(document()), media_type="application/json")
