"""``GET /openapi.json``: the document :mod:`mockserver.http.openapi` generates, served as is."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from mockserver.http.openapi import document
from mockserver.http.sse import dumps


async def openapi_json(request: Request) -> Response:
    return Response(dumps(document()), media_type="application/json")
