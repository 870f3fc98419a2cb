"""What only a Redis Cluster has (the contract itself runs on one: ``redis-cluster`` in
conftest): every key of the state, and every key of the records, in one slot each — so no
script or multi-key command crosses slots — and a node that crashes and comes back: meanwhile
what needs it is StateUnavailable (a 503 the client retries), after it the state serves again
by itself, as with one Redis (tests/state/test_shared_subsystems.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from redis.crc import key_slot

from mockserver.clock import SystemClock
from mockserver.state.base import Draw, State, StateUnavailable
from mockserver.state.open import open_state
from mockserver.state.records import Query, Record
from tests.support.redis_cluster import RedisCluster
from tests.support.redis_server import Client


@pytest.fixture
async def clustered(redis_cluster: RedisCluster) -> AsyncIterator[State]:
    redis_cluster.flush()
    state = open_state(redis_cluster.url, SystemClock())
    await state.ping()
    yield state
    await state.close()
    await state.records.close()


async def test_every_key_is_in_one_slot_per_kind(redis_cluster: RedisCluster, clustered: State) -> None:
    await clustered.put("script:s:a:rule", b"1")
    await clustered.exchange(["faults:x"], ["script:counts:s:b:r1", "journal:cleared"])
    await clustered.map_put("script:rules", "r", b"{}")
    await clustered.push("journal:s:c:list", b"e", 5)
    await clustered.draw([Draw("rate:k1:m", 6, 0.1, 1), Draw("rate:k1:m:tokens", 100, 1, 10)], time.time())
    record = Record(
        "resp_1", {"id": "resp_1", "status": "in_progress", "model": "m", "metadata": {}}, (), (), True, True
    )
    assert await clustered.records.create(record)
    assert await clustered.records.update(
        "resp_1", {"status": "completed"}, [{"sequence_number": 0}], frozenset({"in_progress"})
    )
    assert (await clustered.records.find(Query(kind="response", after="resp_1"))) is not None
    redis = Client(redis_cluster.url)
    try:
        keys = [key.decode() for key in await redis.call("KEYS", "*")]
    finally:
        await redis.close()
    state = {key_slot(k.encode()) for k in keys if k.startswith("mockserver:{state}:")}
    records = {key_slot(k.encode()) for k in keys if k.startswith("mockserver:{records}:")}
    assert len(state) == 1 and len(records) == 1, keys
    assert len(keys) >= 10 and all(k.startswith(("mockserver:{state}:", "mockserver:{records}:")) for k in keys)


async def _until_served(state: State, seconds: float) -> float:
    started = time.monotonic()
    while True:
        try:
            await state.add("after")
            return time.monotonic() - started
        except StateUnavailable:
            assert time.monotonic() - started < seconds, "not served again in time"
            await asyncio.sleep(0.05)


async def test_a_node_that_crashes_and_comes_back(redis_cluster: RedisCluster, clustered: State) -> None:
    await clustered.put("k", b"v")
    redis = Client(redis_cluster.url)
    try:
        port = await redis.port_of("mockserver:{state}:v:k")
    finally:
        await redis.close()
    node = next(n for n in redis_cluster.nodes if n.port == port)
    node.stop()  # SIGKILL: the node that holds every key of the state
    try:
        with pytest.raises(StateUnavailable) as lost:
            await clustered.get("k")
        assert "redis+cluster://127.0.0.1:" in lost.value.message and lost.value.status == 503
        with pytest.raises(StateUnavailable):
            await clustered.exchange(["k"], ["n"])
    finally:
        node.start()
    redis_cluster.wait_ok()
    await _until_served(clustered, 15)
    assert await clustered.get("k") is None  # no persistence: it came back empty, and serves
    assert await clustered.add("n") == 1
