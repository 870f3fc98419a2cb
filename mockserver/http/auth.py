"""Bearer-token authentication of the provider paths (``--api-keys``)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mockserver.errors import APIError, AuthenticationError

__all__ = ["BearerAuth"]


class BearerAuth:
    """401 unless the bearer token is one of ``keys`` (an empty set accepts anything)."""

    def __init__(self, app: ASGIApp, keys: frozenset[str], answer: Callable[[APIError, Scope], Response]) -> None:
        self.app = app
        self.keys = keys
        self.answer = answer  # the error as the request's profile words it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.keys and scope["type"] == "http" and scope["path"].startswith("/v1/"):
            problem = self._problem(dict(scope["headers"]).get(b"authorization", b"").decode("latin-1"))
            if problem is not None:
                await self.answer(problem, scope)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _problem(self, header: str) -> AuthenticationError | None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return AuthenticationError(
                "You didn't provide an API key. You need to provide your API key in an Authorization "
                "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                code="missing_api_key",
            )
        token = token.strip()
        if token not in self.keys:
            shown = token[:3] + "*" * 4 + token[-4:] if len(token) > 8 else "*" * 4
            return AuthenticationError(f"Incorrect API key provided: {shown}.", code="invalid_api_key")
        return None
