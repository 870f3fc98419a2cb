"""One batch line sent through the whole app, in this process, as a direct request would go.

The app (given by ``create_app``, which builds it: this floor never imports the app) runs
every layer — the edge (request id, metrics, the fault injector and its journal entry, the
bearer keys), the route, the handler with its seed, scripted rules, cassettes and faults by
rule — so the answer is, byte for byte, what the same request sent directly gets. No socket
and no HTTP framing: nothing a line's answer depends on lives there.

Starlette's outermost layer answers an unexpected error with a 500 and then raises it again
(for the server to log): the answer is kept and the exception logged here, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message

__all__ = ["LINE_TIMEOUT", "Answer", "InProcess"]

log = logging.getLogger("mockserver")

LINE_TIMEOUT = 300.0  # real seconds a line may go unanswered before its client "hangs up"


@dataclass(frozen=True, slots=True)
class Answer:
    status: int  # 0: the app sent no answer at all (a transport fault)
    request_id: str | None
    body: bytes


class InProcess:
    """Calls ``app`` with a POST of a JSON body, as a client on the loopback would."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(
        self, path: str, body: bytes, headers: Sequence[tuple[bytes, bytes]], extra: dict[str, Any]
    ) -> Answer:
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"mockserver.batch"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
            "client": ("127.0.0.1", 0),
            "server": ("mockserver.batch", 80),
            "state": {},
            **extra,
        }
        sent = False
        finished = asyncio.Event()

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            # Asked again only by a listener for hang-ups: there is none until the answer is
            # whole — or until a line that never answers (``transport.hang``) is given up.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(finished.wait(), LINE_TIMEOUT)
            return {"type": "http.disconnect"}

        status, request_id, chunks = 0, None, []

        async def send(message: Message) -> None:
            nonlocal status, request_id
            if message["type"] == "http.response.start":
                status = message["status"]
                for key, value in message.get("headers", ()):
                    if key.lower() == b"x-request-id":
                        request_id = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        try:
            await self.app(scope, receive, send)
        except Exception:
            log.exception("a batch line broke on %s", path)
            if status == 0:
                status = 500
        finally:
            finished.set()
        return Answer(status, request_id, b"".join(chunks))
