"""Server subprocesses: commands, start-up and readiness, and always a clean end.

Every server is its own child process, started the way users start it, and every child is
terminated (then killed) in a ``finally``, so the benchmark never leaves one behind.
Output goes to a temporary log file, not a pipe: a pipe nobody reads fills up and stalls
the server mid-benchmark.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ROOT",
    "Server",
    "ceiling_command",
    "free_port",
    "get",
    "mockserver_command",
    "post_json",
    "request",
    "running",
    "stop",
]

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"

# The uvicorn settings both servers share. ``mockserver serve`` passes loop/http "auto",
# which resolves to uvloop/httptools when installed (the report checks that they are).
UVICORN_FLAGS = (
    "--loop",
    "uvloop",
    "--http",
    "httptools",
    "--no-access-log",
    "--log-level",
    "warning",
    "--workers",
    "1",
)


@dataclass(frozen=True)
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, size: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-size:]
        except OSError:
            return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def mockserver_command(port: int, prefix: Sequence[str] | None = None, extra: Sequence[str] = ()) -> list[str]:
    """``python -m mockserver serve`` (or ``prefix serve``, for a development launcher)."""
    base = list(prefix) if prefix else [sys.executable, "-m", "mockserver"]
    return [*base, "serve", "--host", HOST, "--port", str(port), "--log-level", "warning", *extra]


def ceiling_command(port: int) -> list[str]:
    return [sys.executable, "-m", "uvicorn", "bench.ceiling:app", "--host", HOST, "--port", str(port), *UVICORN_FLAGS]


def get(port: int, path: str, timeout: float = 2.0) -> int:
    """Status of ``GET path``; raises OSError while nothing listens."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def request(port: int, method: str, path: str, body: object = None, timeout: float = 60.0) -> tuple[int, bytes]:
    """One request (a JSON body unless ``body`` is None); returns the status and the raw answer."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        payload = None if body is None else json.dumps(body)
        headers = {} if body is None else {"content-type": "application/json"}
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def post_json(port: int, path: str, body: object, timeout: float = 60.0) -> tuple[int, dict[str, object]]:
    """``POST`` a JSON body; returns the status and the decoded JSON answer."""
    status, raw = request(port, "POST", path, body, timeout)
    data = json.loads(raw) if raw else {}
    return status, data if isinstance(data, dict) else {}


def spawn(name: str, argv: Sequence[str], root: Path = ROOT) -> Server:
    """Start a child in ``root`` (the repository, or a checkout of another commit: its own
    ``mockserver`` package comes first on the path) with its output in a temporary log file."""
    log = Path(tempfile.mkstemp(prefix=f"bench-{name}-", suffix=".log")[1])
    port = int(argv[argv.index("--port") + 1])
    env = dict(os.environ)
    if root != ROOT:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    return Server(name, proc, port, log)


def wait_ready(server: Server, timeout: float = 60.0, interval: float = 0.005) -> float:
    """Poll ``/health`` until it answers 200; returns the seconds waited from now."""
    start = time.perf_counter()
    deadline = start + timeout
    while True:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.proc.returncode}:\n{server.log_tail()}")
        try:
            if get(server.port, "/health", timeout=1.0) == 200:
                return time.perf_counter() - start
        except OSError:
            pass  # not listening yet
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{server.name} did not answer /health within {timeout} s:\n{server.log_tail()}")
        time.sleep(interval)


def stop(server: Server) -> None:
    """Terminate, then kill if it lingers; remove the log."""
    if server.proc.poll() is None:
        server.proc.terminate()
        try:
            server.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait(timeout=10)
    server.log.unlink(missing_ok=True)


@contextmanager
def running(name: str, argv: Sequence[str], timeout: float = 60.0, root: Path = ROOT) -> Iterator[Server]:
    """A started server, ready on /health, stopped on exit whatever happens."""
    server = spawn(name, argv, root)
    try:
        wait_ready(server, timeout)
        yield server
    finally:
        stop(server)
