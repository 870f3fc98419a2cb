"""``GET /health``: answers from the event loop alone, whatever the model is doing.

With state shared with other processes (``--state sqlite:PATH`` or ``redis://``) the server is
only as healthy as that engine: it is pinged, with a short timeout so a load balancer's probe
never hangs on a Redis that accepts connections but does not answer. While it is down the
answer is 503 naming what is down (``{"status": "degraded", "down": ["state"], "state": URL}``,
the password hidden), so a load balancer takes the process out of rotation; the next probe
after the engine is back says ``ok`` again — nothing here remembers a failure. With memory
state there is nothing to ping, and the answer is ``{"status": "ok"}`` as it always was.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse

from mockserver.context import ServerContext
from mockserver.errors import APIError
from mockserver.state.urls import hidden

__all__ = ["PING_TIMEOUT", "health"]

# Seconds the state engine gets to answer a ping. Loopback Redis answers in ~0.1 ms and a
# remote one in a few ms: a second of silence is an engine that is not serving.
PING_TIMEOUT = 1.0


async def health(request: Request) -> JSONResponse:
    ctx: ServerContext = request.app.state.ctx
    state = ctx.state
    if not state.shared:
        return JSONResponse({"status": "ok"})
    where = hidden(state.url)  # the engine's url hides it already; twice is cheap insurance
    try:
        await asyncio.wait_for(state.ping(), PING_TIMEOUT)
    except (APIError, OSError, TimeoutError):
        # StateUnavailable (an APIError) is how an engine says it is down; a raw socket error or
        # a ping that never answers mean the same to whoever routes traffic here.
        body = {"status": "degraded", "down": ["state"], "state": where}
        return JSONResponse(body, status_code=503, headers={"retry-after": "1"})
    return JSONResponse({"status": "ok", "state": where})
