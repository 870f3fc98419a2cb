"""A three-node Redis Cluster on loopback for the state and fleet tests: three ``redis-server
--cluster-enabled yes`` in their own temporary folders, joined by ``redis-cli --cluster create``
(no replicas), torn down after. A node can be stopped (SIGKILL, as a crash) and started again on
its port with its ``nodes.conf``: it rejoins with the slots it had (and, without persistence,
without their keys).
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from types import TracebackType

from tests.support.redis_server import RedisServer, binary, cli

__all__ = ["RedisCluster", "available"]

NODE_TIMEOUT_MS = 3000  # how long a silent node takes to be judged failed (the default is 15 s)


def _port() -> int:
    """A free port whose cluster bus port (10000 above it) is free too."""
    while True:
        port = random.randrange(20_000, 50_000)
        try:
            with socket.socket() as one, socket.socket() as bus:
                one.bind(("127.0.0.1", port))
                bus.bind(("127.0.0.1", port + 10_000))
        except OSError:
            continue
        return port


def available() -> bool:
    """Whether a cluster can be made here (a redis-server and a redis-cli)."""
    return binary() is not None and cli() is not None


class RedisCluster:
    """Three nodes; :attr:`url` is the ``redis+cluster://`` URL naming them all."""

    def __init__(self, size: int = 3) -> None:
        self.nodes = [RedisServer() for _ in range(size)]
        for node in self.nodes:
            node.port = _port()  # free_port()'s may be above 55535: no room for the bus port
            node.extra = [
                "--cluster-enabled", "yes",
                "--cluster-config-file", f"{node.folder}/nodes.conf",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
            ]  # fmt: skip

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def start(self) -> RedisCluster:
        for node in self.nodes:
            node.start()
        tool = cli()
        assert tool is not None
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run(
            [tool, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.wait_ok()
        return self

    def info(self, node: RedisServer) -> str:
        tool = cli()
        assert tool is not None
        done = subprocess.run(
            [tool, "-p", str(node.port), "cluster", "info"], capture_output=True, text=True, timeout=10, check=False
        )
        return done.stdout

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every running node says ``cluster_state:ok`` (slots assigned, all reachable)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all("cluster_state:ok" in self.info(n) for n in self.nodes if n.process is not None):
                return
            time.sleep(0.05)
        raise RuntimeError("the cluster did not come up: " + self.info(self.nodes[0]))

    def flush(self) -> None:
        """Empty every node (the cluster's layout stays)."""
        for node in self.nodes:
            node.flush()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> RedisCluster:
        try:
            return self.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for node in self.nodes:
            node.__exit__(kind, exc, tb)
