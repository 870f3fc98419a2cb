"""Commands written together (mockserver/state/redis/pipe.py) against a real redis-server and a
real three-node cluster: what one turn of the event loop asks goes out in one write, yet every
caller is answered its own replies — its own error reply too — and a caller that gives up
shifts nobody's replies. On a cluster the same holds per node, and a stale map of the slots
is corrected by the redirect Redis answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio.connection
from redis.crc import key_slot
from redis.exceptions import ResponseError

from mockserver.state.redis.client import Link
from mockserver.state.redis.pipe import ClusterConnections, Connections, pack
from tests.support.redis_cluster import RedisCluster
from tests.support.redis_server import RedisServer

# ---- what goes on the wire ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("GET", "k"),
        ("SET", "mockserver:{state}:v:ключ", b"\x00\xff\r\n", "PX", 1500),
        ("EVALSHA", "a" * 40, 2, "k1", "k2", -7, 0.1, 1e-300, 12345678901234567890),
        ("HSET", b"h", "", memoryview(b"view"), bytearray(b"array")),
    ],
    ids=["short", "binary-and-utf8", "numbers", "empty-and-buffers"],
)
def test_a_command_is_packed_as_redis_py_packs_it(command: tuple[Any, ...]) -> None:
    theirs = redis.asyncio.connection.Connection().pack_command(*command)
    assert pack(command) == b"".join(bytes(chunk) for chunk in theirs)


@pytest.mark.parametrize("bad", [None, True, object()], ids=["none", "bool", "object"])
def test_what_redis_cannot_hold_is_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="cannot send"):
        pack(("SET", "k", bad))


# ---- one Redis ------------------------------------------------------------------------------


class Writes:
    """Counts redis-py's writes (``send_packed_command``) and the commands in each."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        real = redis.asyncio.connection.AbstractConnection.send_packed_command

        async def counted(connection: Any, command: Any, check_health: bool = True) -> None:
            chunks = [command] if isinstance(command, bytes) else list(command)
            self.sizes.append(sum(bytes(chunk).count(b"\r\n*") + bytes(chunk).startswith(b"*") for chunk in chunks))
            await real(connection, chunks, check_health)

        monkeypatch.setattr(redis.asyncio.connection.AbstractConnection, "send_packed_command", counted)


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Writes:
    return Writes(monkeypatch)


@pytest.fixture
async def link(redis_server: RedisServer) -> AsyncIterator[Link]:
    redis_server.flush()
    made = Link(redis_server.url)
    await made.client().execute_command("PING")  # connected (and logged in) before anything is counted
    yield made
    await made.close()


async def test_one_turns_commands_go_in_one_write(link: Link, writes: Writes) -> None:
    client = link.client()
    assert isinstance(client, Connections)
    replies = await asyncio.gather(*(client.execute_command("INCR", "n") for _ in range(20)))
    assert sorted(replies) == list(range(1, 21))  # each caller its own count
    assert writes.sizes == [20]
    await client.execute_command("GET", "n")  # a later turn: a write of its own
    assert writes.sizes == [20, 1]


async def test_each_caller_gets_its_own_replies_and_errors(link: Link, writes: Writes) -> None:
    client = link.client()
    await client.execute_command("SET", "text", "v")
    writes.sizes.clear()
    results = await asyncio.gather(
        client.execute_command("INCR", "n"),
        client.execute_command("INCR", "text"),  # an error reply: this caller's alone
        client.execute_many([("INCR", "n"), ("GET", "text"), ("LPUSH", "text", "x")]),  # a group, with an error
        client.execute_many([("INCR", "n"), ("GET", "text")]),
        client.execute_command("GET", "text"),
        return_exceptions=True,
    )
    assert writes.sizes == [8]
    assert results[0] == 1 and results[4] == b"v"
    assert isinstance(results[1], ResponseError) and "not an integer" in str(results[1])
    assert isinstance(results[2], ResponseError) and "WRONGTYPE" in str(results[2])
    assert results[3] == [3, b"v"]  # the group before it ran whole: it is not a transaction


async def test_a_caller_that_gives_up_shifts_no_ones_replies(link: Link) -> None:
    client = link.client()
    first = asyncio.ensure_future(client.execute_command("INCR", "a"))
    gone = asyncio.ensure_future(client.execute_command("INCR", "b"))
    last = asyncio.ensure_future(client.execute_command("INCR", "c"))
    await asyncio.sleep(0)  # all three asked and written
    gone.cancel()
    assert (await first, await last) == (1, 1)
    assert await client.execute_command("MGET", "a", "b", "c") == [b"1", b"1", b"1"]  # it ran: only unheard
    assert await client.execute_command("INCR", "a") == 2


# ---- a cluster ------------------------------------------------------------------------------


@pytest.fixture
async def cluster_link(redis_cluster: RedisCluster) -> AsyncIterator[Link]:
    redis_cluster.flush()
    made = Link(redis_cluster.url)
    yield made
    await made.close()


async def test_a_cluster_writes_once_per_node_and_routes_by_slot(cluster_link: Link, writes: Writes) -> None:
    client = cluster_link.client()
    assert isinstance(client, ClusterConnections)
    await client.execute_command("GET", "warm:{state}")  # connected and logged in, the map read
    mapped = client.cluster.nodes_manager
    here = mapped.get_node_from_slot(key_slot(b"{state}")).name
    state = "{state}"
    other = next(t for t in ("{a}", "{b}", "{c}") if mapped.get_node_from_slot(key_slot(t.encode())).name != here)
    await client.execute_command("GET", f"warm:{other}")
    writes.sizes.clear()
    replies = await asyncio.gather(
        *(client.execute_command("INCR", f"n:{tag}") for tag in (state, other) for _ in range(5)),
        client.execute_many([("INCR", "m:{state}"), ("GET", "m:{state}")]),
    )
    assert sorted(replies[:5]) == sorted(replies[5:10]) == [1, 2, 3, 4, 5] and replies[10] == [1, b"1"]
    assert sorted(writes.sizes) == [5, 7]  # one write to each of the two nodes
    assert await client.cluster.execute_command("GET", "n:{state}") == b"5"  # redis-py's own client agrees


async def test_a_stale_map_of_the_slots_is_corrected_by_the_redirect(cluster_link: Link) -> None:
    client = cluster_link.client()
    assert isinstance(client, ClusterConnections)
    assert await client.execute_command("SET", "k:{state}", "v") == b"OK"
    slot = key_slot(b"{state}")
    manager = client.cluster.nodes_manager
    right = manager.get_node_from_slot(slot)
    wrong = next(node for node in manager.nodes_cache.values() if node.name != right.name)
    manager.slots_cache[slot] = [wrong]  # as after a resharding this process has not heard of
    assert await client.execute_command("GET", "k:{state}") == b"v"  # MOVED, then the right node
    assert manager.get_node_from_slot(slot).name == right.name
    manager.slots_cache[slot] = [wrong]
    assert await client.execute_many([("GET", "k:{state}"), ("INCR", "n:{state}")]) == [b"v", 1]
