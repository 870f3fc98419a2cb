"""The state engines every contract test runs against: one parametrized fixture.

``redis`` runs against a real ``redis-server`` started for the session on a free port
(:mod:`tests.support.redis_server`; ``make test`` installs one when the machine lacks it).

``redis-cluster`` runs against a three-node Redis Cluster started once for the session
(:mod:`tests.support.redis_cluster`: ``redis-server --cluster-enabled yes`` ×3 and ``redis-cli
--cluster create``, loopback only).

``redis-sentinel`` runs against a redis-server watched by a Sentinel (:mod:`tests.support.redis_sentinel`:
``redis+sentinel://`` finds the primary through it; no failover).

``state_url`` is the parametrized one (ids ``memory``, ``sqlite``, ``redis``, ``redis-cluster``,
``redis-sentinel``); ``state`` opens a
fresh, empty state on it, and ``reopen`` opens more on the same URL — what another server
process sharing the state would hold (for memory that is a state of its own: nothing is shared).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from mockserver.clock import SystemClock
from mockserver.state.base import State
from mockserver.state.open import open_state
from tests.support.redis_cluster import RedisCluster, available
from tests.support.redis_sentinel import RedisSentinel
from tests.support.redis_server import INSTALL, RedisServer, binary

ENGINES = ("memory", "sqlite", "redis", "redis-cluster", "redis-sentinel")

Reopen = Callable[[], Awaitable[State]]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    if binary() is None:
        pytest.skip(f"no redis-server: run {INSTALL}")
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    if not available():
        pytest.skip(f"no redis-server and redis-cli: run {INSTALL}")
    with RedisCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def redis_sentinel() -> Iterator[RedisSentinel]:
    if binary() is None:
        pytest.skip(f"no redis-server: run {INSTALL}")
    with RedisSentinel() as watched:
        yield watched


@pytest.fixture(params=ENGINES)
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty state of each engine in turn."""
    engine = request.param
    if engine == "memory":
        return "memory"
    if engine == "sqlite":
        return f"sqlite:{tmp_path / 'state.db'}"
    if engine == "redis-cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        cluster.flush()
        return cluster.url
    if engine == "redis-sentinel":
        watched: RedisSentinel = request.getfixturevalue("redis_sentinel")
        watched.flush()
        return watched.url
    server: RedisServer = request.getfixturevalue("redis_server")
    server.flush()
    return server.url


@pytest_asyncio.fixture
async def state(state_url: str) -> AsyncIterator[State]:
    """A fresh, empty state of each engine in turn."""
    async with _opened() as (opener, _):
        yield await opener(state_url)


@pytest_asyncio.fixture
async def reopen(state_url: str) -> AsyncIterator[Reopen]:
    """Opens another state on ``state``'s URL (pinged; closed after the test)."""
    async with _opened() as (opener, _):
        yield lambda: opener(state_url)


class _opened:
    """Opens states (pinged) and closes every one of them, and its records, on the way out."""

    def __init__(self) -> None:
        self.states: list[State] = []

    async def open(self, url: str) -> State:
        opened = open_state(url, SystemClock())
        self.states.append(opened)
        await opened.ping()
        return opened

    async def __aenter__(self) -> tuple[Callable[[str], Awaitable[State]], list[State]]:
        return self.open, self.states

    async def __aexit__(self, *exc: object) -> None:
        for opened in reversed(self.states):
            await opened.close()
            await opened.records.close()  # the state leaves its records open: we close them
