"""The state engines every contract test runs against: one parametrized fixture.

``redis`` runs against a real ``redis-server`` started for the session on a free port
(:mod:`tests.support.redis_server`; ``make test`` installs one when the machine lacks it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from mockserver.clock import SystemClock
from mockserver.state.base import State
from mockserver.state.open import open_state
from tests.support.redis_server import INSTALL, RedisServer, binary

ENGINES = ("memory", "sqlite", "redis")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    if binary() is None:
        pytest.skip(f"no redis-server: run {INSTALL}")
    with RedisServer() as server:
        yield server


@pytest_asyncio.fixture(params=ENGINES)
async def state(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[State]:
    """A fresh, empty state of each engine in turn."""
    url = _url(request, tmp_path)
    opened = open_state(url, SystemClock())
    await opened.ping()
    try:
        yield opened
    finally:
        await opened.close()


def _url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    engine = request.param
    if engine == "memory":
        return "memory"
    if engine == "sqlite":
        return f"sqlite:{tmp_path / 'state.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    server.flush()
    return server.url
