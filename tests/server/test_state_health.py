"""``/health`` with shared state, and an error from the state anywhere: its own 503, never a 500.

Against a real ``redis-server`` (stopped and started again on its port) and a real SQLite file,
the app served in-process.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.state.base import StateUnavailable
from tests.support.redis_server import INSTALL, RedisServer, binary


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    if binary() is None:
        pytest.fail(f"no redis-server: run {INSTALL}")
    with RedisServer(password="pw-of-health") as server:
        yield server


async def _client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client
    await app.state.ctx.state.close()


async def test_memory_state_health_is_as_it_always_was() -> None:
    async for client in _client(Settings()):
        answer = await client.get("/health")
        assert answer.status_code == 200 and answer.json() == {"status": "ok"}


async def test_sqlite_state_health_names_the_state(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'state.db'}"
    async for client in _client(Settings(state=url)):
        answer = await client.get("/health")
        assert answer.status_code == 200 and answer.json() == {"status": "ok", "state": url}


async def test_health_says_the_state_is_down_and_recovers_by_itself(redis: RedisServer) -> None:
    hidden = redis.url.replace("pw-of-health", "***")
    async for client in _client(Settings(state=redis.url)):
        assert (await client.get("/health")).json() == {"status": "ok", "state": hidden}
        redis.stop()
        started = time.monotonic()
        down = await client.get("/health")
        assert time.monotonic() - started < 2.0  # a probe is answered promptly, not after a long hang
        assert down.status_code == 503
        assert down.json() == {"status": "degraded", "down": ["state"], "state": hidden}
        redis.start()
        deadline = time.monotonic() + 5
        while (up := await client.get("/health")).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert up.status_code == 200 and up.json()["status"] == "ok"


class _Unavailable:
    """A layer that meets a lost state engine before any route runs (as a middleware reading
    shared state would): the exception goes to the app's last-resort handler."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/chat/completions":
            raise StateUnavailable("redis://:***@cache:6379/0", "connection refused")
        await self.app(scope, receive, send)


async def test_a_state_error_outside_the_routes_is_its_own_503_not_a_500() -> None:
    app = create_app(Settings())
    app.add_middleware(_Unavailable)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answer = await client.post("/v1/chat/completions", json={"model": "m", "messages": []})
    assert answer.status_code == 503
    assert answer.headers["x-should-retry"] == "true" and answer.headers["retry-after"] == "1"
    error = answer.json()["error"]
    assert error["code"] == "state_unavailable" and error["type"] == "server_error"
    assert "redis://:***@cache:6379/0" in error["message"]
