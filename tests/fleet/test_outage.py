"""Redis killed (SIGKILL, as a crash) and restarted mid-load under two server processes.

While it is down: requests that need the state get a 503 in OpenAI's envelope with
``x-should-retry: true`` (which the SDKs retry by themselves), no other 5xx and no dropped
connection, and ``/health`` says the state is down. After it is back: full service within a few
seconds, by itself, and every stored response the fleet acknowledged (``store: true`` answered
200) is there — Redis runs with ``appendfsync always``, so what it acknowledged survives.
Loopback only, bounded: about six seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.fleet.harness import MODEL, Node, fleet
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.slow

OUTAGE = 1.5  # seconds Redis stays down
RECOVERY = 5.0  # seconds the fleet may take to serve fully again once Redis is back


@dataclass(frozen=True)
class Outcome:
    at: float  # time.monotonic() the request was sent
    node: int
    status: int  # 0: no answer (the connection failed)
    retry: str | None  # x-should-retry
    body: dict[str, object]
    error: str = ""


@pytest.fixture
def durable() -> Iterator[RedisServer]:
    with RedisServer(appendonly=True, appendfsync="always") as server:
        yield server


def _load(nodes: list[Node], index: int, stop: threading.Event, out: list[Outcome]) -> None:
    """Stored responses, one after the other, alternating between the nodes."""
    clients = [httpx.Client(base_url=n.url, timeout=10, trust_env=False) for n in nodes]
    i = 0
    try:
        while not stop.is_set():
            node = (index + i) % len(nodes)
            sent = time.monotonic()
            body = {"model": MODEL, "input": f"load {index}-{i}", "store": True}
            try:
                answer = clients[node].post("/v1/responses", json=body)
            except httpx.HTTPError as exc:
                out.append(Outcome(sent, node, 0, None, {}, repr(exc)))
            else:
                try:
                    data = answer.json()
                except ValueError:
                    data = {"unparsed": answer.text[:200]}
                out.append(Outcome(sent, node, answer.status_code, answer.headers.get("x-should-retry"), data))
            i += 1
    finally:
        for client in clients:
            client.close()


def _health(node: Node) -> httpx.Response:
    return httpx.get(node.url + "/health", timeout=5, trust_env=False)


def test_redis_killed_and_restarted_mid_load(durable: RedisServer) -> None:
    with fleet(2, ["--state", durable.url, "--backend", "script"]) as nodes:
        assert nodes[0].admin("POST", "answers", json={"text": "kept"}).status_code == 200
        outcomes: list[Outcome] = []
        stop = threading.Event()
        loaders = [threading.Thread(target=_load, args=(nodes, k, stop, outcomes)) for k in range(4)]
        for loader in loaders:
            loader.start()
        try:
            time.sleep(0.7)
            durable.stop()
            killed = time.monotonic()
            # Both processes say so on /health, naming the state (a load balancer's probe).
            for node in nodes:
                deadline = time.monotonic() + OUTAGE
                while (health := _health(node)).status_code != 503 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert health.status_code == 503, health.text
                assert health.json()["down"] == ["state"] and health.json()["state"] == durable.url
            time.sleep(max(0.0, killed + OUTAGE - time.monotonic()))
            durable.start()
            back = time.monotonic()
            for node in nodes:
                deadline = back + RECOVERY
                while (health := _health(node)).status_code != 200 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert health.status_code == 200, f"{node.name} not healthy {RECOVERY} s after Redis came back"
            recovered = time.monotonic()
            time.sleep(0.8)
        finally:
            stop.set()
            for loader in loaders:
                loader.join(timeout=30)

        # Every answer a 200 or the 503 envelope a client retries; never a dropped connection.
        dropped = [o for o in outcomes if o.status == 0]
        assert dropped == [], dropped[:3]
        others = [o for o in outcomes if o.status not in (200, 503)]
        assert others == [], others[:3]
        unavailable = [o for o in outcomes if o.status == 503]
        assert unavailable, "no request met the outage: the test proved nothing"
        for o in unavailable:
            error = o.body.get("error")
            assert isinstance(error, dict) and error.get("type") == "server_error" and error.get("message"), o
            assert error.get("code") == "state_unavailable", o
            assert o.retry == "true", o
            assert o.at > killed - 1.0, o  # 503s only around the outage (a request in flight when it began)
        # Full service once the fleet said it was healthy again.
        after = [o for o in outcomes if o.at > recovered + 0.2]
        assert after and all(o.status == 200 for o in after), [o for o in after if o.status != 200][:3]
        # Nothing acknowledged is lost: each stored response, read through the other process.
        kept = [(o.node, str(o.body["id"])) for o in outcomes if o.status == 200]
        assert len(kept) > 20
        print(f"{len(outcomes)} requests, {len(unavailable)} 503s, {len(kept)} kept; back in {recovered - back:.2f} s")
        with httpx.Client(timeout=10, trust_env=False) as http:
            for index, response_id in kept:
                other = nodes[1 - index]
                found = http.get(f"{other.url}/v1/responses/{response_id}")
                assert found.status_code == 200, (response_id, found.text)
                assert found.json()["output"][0]["content"][0]["text"] == "kept"
