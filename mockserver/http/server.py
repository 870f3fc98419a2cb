"""One uvicorn configuration, for ``mockserver serve``, the pytest plugin's socket servers and the tests.

Keep-alive: an idle connection stays open :data:`KEEP_ALIVE` seconds, longer than clients keep
idle connections (httpx, so the OpenAI SDK: 5 s; aiohttp: 15 s; Go: 90 s). At uvicorn's
default, 5 s, both ends expire together, and a request sent on a connection the server is just
closing gets a TCP reset (an SDK with ``max_retries=0`` fails with ``APIConnectionError``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

__all__ = ["KEEP_ALIVE", "uvicorn_config"]

KEEP_ALIVE = 120


def uvicorn_config(
    app: ASGIApp, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning", **overrides: Any
) -> uvicorn.Config:
    """uvicorn's ``Config`` as every mockserver server runs: uvloop and httptools where they
    are installed, no access log (a test double answers thousands of calls), the lifespan on,
    the keep-alive above. ``overrides`` are the few things a caller must differ in."""
    import uvicorn

    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "access_log": False,
        "loop": "auto",
        "http": "auto",
        "lifespan": "on",
        "timeout_keep_alive": KEEP_ALIVE,
        **overrides,
    }
    return uvicorn.Config(app, **options)
