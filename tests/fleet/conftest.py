"""Fleets of real server processes on one state: a real ``redis-server`` (started here on a free
loopback port), a three-node Redis Cluster (:mod:`tests.support.redis_cluster`) or one SQLite file.

One fleet per layout, shared by the module's tests: starting processes is the slow part. The
tests keep out of each other's way as parallel test workers do on a shared fleet — each uses
its own session (rules, counts, journal) and its own API keys (rate-limit buckets).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.harness import Node, fleet
from tests.support.redis_cluster import RedisCluster, available
from tests.support.redis_server import INSTALL, RedisServer, binary

RATE_LIMIT_RPM = 6
# The fleet's clock is virtual (frozen) and shared: a background response stays queued until
# the clock is moved QUEUE_TIME seconds through the admin API of any process, so a test holds
# a run in the middle of its life as long as it needs to, without sleeping or racing it.
FROZEN_AT = 1_700_000_000
QUEUE_TIME = 10
FLEET_FLAGS = (
    "--backend",
    "script",  # no model: the answers are scripted, and a process starts in about a second
    "--rate-limit-rpm",
    str(RATE_LIMIT_RPM),
    "--frozen-time",
    str(FROZEN_AT),
    "--responses-queue-time",
    str(QUEUE_TIME),
)
LAYOUTS = ("redis-2", "redis-4", "cluster-2", "sqlite-2")


def pytest_configure(config: pytest.Config) -> None:
    # xdist registers the mark itself; without xdist (-p no:xdist) --strict-markers would refuse it.
    config.addinivalue_line("markers", "xdist_group(name): run the group's tests on one xdist worker")


@pytest.fixture(scope="session")
def redis() -> Iterator[RedisServer]:
    if binary() is None:
        pytest.fail(f"no redis-server: run {INSTALL}")  # make test installs one: its absence is a defect
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def cluster() -> Iterator[RedisCluster]:
    if not available():
        pytest.fail(f"no redis-server and redis-cli: run {INSTALL}")
    with RedisCluster() as started:
        yield started


@pytest.fixture(scope="module", params=LAYOUTS)
def nodes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Node]]:
    """The processes of one layout: ``redis-N`` (N processes, one Redis), ``cluster-2`` (two on a
    Redis Cluster) or ``sqlite-2``."""
    engine, count = str(request.param).split("-")
    if engine == "redis":
        server: RedisServer = request.getfixturevalue("redis")
        server.flush()
        url = server.url
    elif engine == "cluster":
        nodes: RedisCluster = request.getfixturevalue("cluster")
        nodes.flush()
        url = nodes.url
    else:
        url = f"sqlite:{Path(tmp_path_factory.mktemp('fleet')) / 'state.db'}"
    with fleet(int(count), ["--state", url, *FLEET_FLAGS]) as started:
        yield started
