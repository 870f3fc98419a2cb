"""``GET /openapi.json``: the document :mod:`mockserver.openapi` generates, served as is."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from mockserver.openapi import document
from mockserver.streaming import dumps


async def openapi_json(request: Request) -> Response:
    return Response(dumps(document()), media_type="application/json")
