"""``GET /health``: answers from the event loop alone, whatever the model is doing."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})
