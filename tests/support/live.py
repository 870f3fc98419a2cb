"""A real server on a real socket for tests: uvicorn in a thread, or in a subprocess.

SSE must be tested over a socket: ``httpx.ASGITransport`` buffers whole bodies, so it
cannot show a stream as it arrives, nor a client that hangs up half-way.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette

from mockserver.http.server import uvicorn_config

ROOT = Path(__file__).resolve().parents[2]  # the repository: tests/support/live.py → ../..
FROZEN = 1_700_000_000.0  # the session server's frozen clock (Settings.frozen_time)


@dataclass(frozen=True)
class Live:
    url: str  # e.g. http://127.0.0.1:43121
    app: Starlette | None  # None for a subprocess server

    @property
    def base_url(self) -> str:
        return self.url + "/v1"


@contextmanager
def serve_in_thread(app: Starlette) -> Iterator[Live]:
    config = uvicorn_config(app)  # the server mockserver serve runs (its keep-alive included)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Live(f"http://127.0.0.1:{port}", app)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serve_in_process(args: Sequence[str] = (), env: dict[str, str] | None = None) -> Iterator[Live]:
    """``python -m mockserver serve`` as a child process, waited for on /health."""
    port = free_port()
    command = [sys.executable, "-m", "mockserver", "serve", "--port", str(port), *args]
    child_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen(command, cwd=ROOT, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                output = proc.stdout.read().decode() if proc.stdout else ""
                raise RuntimeError(f"mockserver exited with {proc.returncode}: {output}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("mockserver did not answer /health within 60 s")
            time.sleep(0.05)
        yield Live(url, None)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
