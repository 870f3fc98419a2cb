"""The ceiling: the fastest a Starlette app can answer on this machine.

One ``POST`` JSON endpoint that parses the body and returns a small fixed JSON object, run
under the same uvicorn settings as mockserver. Its requests/s bound what any Starlette
handler can reach here, so mockserver's figures are reported as a fraction of it.
Run with ``python -m uvicorn bench.ceiling:app --loop uvloop --http httptools``.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

_ANSWER = {"id": "ceiling", "object": "chat.completion", "choices": [{"index": 0, "text": "ok"}]}


async def echo(request: Request) -> JSONResponse:
    """Parse the JSON body (as any JSON handler must), answer a small fixed object."""
    await request.json()
    return JSONResponse(_ANSWER)


async def health(request: Request) -> JSONResponse:
    """So the launcher waits for readiness the same way as for mockserver."""
    return JSONResponse({"status": "ok"})


app = Starlette(
    routes=[
        Route("/v1/chat/completions", echo, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
    ]
)
