"""A Redis watched by a Sentinel on loopback, for the state tests: one ``redis-server`` (the
primary, no replicas) and one ``redis-server --sentinel`` (Debian's redis-sentinel is the same
binary) monitoring it as :data:`SERVICE`, each in its own temporary folder, torn down after.

No failover is ever asked of it (a quorum of one Sentinel and no replica to promote): it is what
``redis+sentinel://`` needs to find the primary — the URL names the Sentinel and the service,
and the engine asks the Sentinel where the primary is.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from tests.support.redis_server import RedisServer, free_port

__all__ = ["SERVICE", "RedisSentinel"]

SERVICE = "mockprimary"  # the name the Sentinel knows the primary by


class RedisSentinel:
    """The primary and its Sentinel; :attr:`url` is the ``redis+sentinel://`` URL of the
    primary's database ``db``."""

    def __init__(self, db: int = 0) -> None:
        self.primary = RedisServer()
        self.port = free_port()
        self.db = db
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.port}/{SERVICE}/{self.db}"

    def start(self) -> RedisSentinel:
        self.primary.start()
        # The Sentinel rewrites its configuration file as it learns: one of its own, writable.
        config = Path(self.primary.folder) / "sentinel.conf"
        config.write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            f"dir {self.primary.folder}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 1\n"
            f"sentinel down-after-milliseconds {SERVICE} 60000\n"  # never judged down in a test
        )
        self.process = subprocess.Popen(
            [self.primary.binary, str(config), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._names_the_primary():
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server --sentinel exited with {self.process.returncode}")
            time.sleep(0.05)
        raise RuntimeError("the Sentinel did not name the primary within 10 s")

    def _names_the_primary(self) -> bool:
        """Whether the Sentinel answers ``SENTINEL get-master-addr-by-name`` with the primary."""
        ask = f"SENTINEL get-master-addr-by-name {SERVICE}".split()
        packed = b"*%d\r\n" % len(ask) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w.encode()) for w in ask)
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(packed)
                answer = sock.recv(256)
        except OSError:
            return False
        return str(self.primary.port).encode() in answer

    def flush(self) -> None:
        """Empty the primary (the Sentinel keeps watching)."""
        self.primary.flush()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> RedisSentinel:
        try:
            return self.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
        self.primary.__exit__(kind, exc, tb)
