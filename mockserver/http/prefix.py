"""Path prefixes that choose a profile per request: ``/fireworks/v1/…`` is answered as
Fireworks, so one server can stand in for several providers at once.

The middleware strips a known profile name from the front of the path and records it in the
ASGI scope; everything after it (auth, routing, error bodies) sees an ordinary ``/v1/…``
request that knows its profile.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from mockserver.context import PROFILE_KEY

__all__ = ["ProfilePrefix"]


class ProfilePrefix:
    def __init__(self, app: ASGIApp, names: Iterable[str]) -> None:
        self.app = app
        self.prefixes = {f"/{name}": name for name in names}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            head, slash, rest = path[1:].partition("/")
            name = self.prefixes.get("/" + head) if slash else None
            if name is not None and rest.startswith("v1/"):
                scope = {**scope, "path": "/" + rest, "raw_path": ("/" + rest).encode(), PROFILE_KEY: name}
        await self.app(scope, receive, send)
