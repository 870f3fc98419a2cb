"""A real server on a real socket for tests: uvicorn in a thread, or in a subprocess.

SSE must be tested over a socket: ``httpx.ASGITransport`` buffers whole bodies, so it
cannot show a stream as it arrives, nor a client that hangs up half-way.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette

from mockserver.http.server import uvicorn_config
from mockserver.spine.backend import ModelBase
from mockserver.spine.events import Event
from mockserver.spine.request import GenerationRequest

ROOT = Path(__file__).resolve().parents[2]  # the repository: tests/support/live.py → ../..
FROZEN = 1_700_000_000.0  # the session server's frozen clock (Settings.frozen_time)


@dataclass(frozen=True)
class Live:
    url: str  # e.g. http://127.0.0.1:43121
    app: Starlette | None  # None for a subprocess server
    pid: int | None = None  # a subprocess server's process id

    @property
    def base_url(self) -> str:
        return self.url + "/v1"


class Borrowed(ModelBase):
    """The session server's model, lent to another app without its lifespan (which would
    close it): ``create_app(settings, backend=Borrowed(live.app.state.ctx.model))``."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.vocab_size = backend.vocab_size

    def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        result: AsyncIterator[Event] = self._backend.generate(request)
        return result


@contextmanager
def uvicorn_in_thread(app: Starlette) -> Iterator[uvicorn.Server]:
    """``app`` under the server ``mockserver serve`` runs (its keep-alive included), in a
    thread of this process: started, and stopped when the block ends."""
    server = uvicorn.Server(uvicorn_config(app))
    thread = threading.Thread(target=server.run, name="live-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def url_of(server: uvicorn.Server) -> str:
    """Where a started uvicorn server listens."""
    return f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"


@contextmanager
def serve_in_thread(app: Starlette) -> Iterator[Live]:
    with uvicorn_in_thread(app) as server:
        yield Live(url_of(server), app)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_healthy(url: str, proc: subprocess.Popen[Any] | None = None, timeout: float = 60.0) -> None:
    """Wait until ``url`` answers /health; a RuntimeError if ``proc`` exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"mockserver exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"mockserver did not answer /health within {timeout:g} s")
        time.sleep(0.05)


def stop(proc: subprocess.Popen[Any]) -> None:
    """Terminate a child process (killed if it lingers) and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextmanager
def serve_in_process(args: Sequence[str] = (), env: dict[str, str] | None = None) -> Iterator[Live]:
    """``python -m mockserver serve`` as a child process on a free port, waited for on /health
    (its output to a temporary file: a pipe nobody reads would fill up and block it)."""
    port = free_port()
    command = [sys.executable, "-m", "mockserver", "serve", "--port", str(port), *args]
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            command, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            try:
                wait_healthy(url, proc)
            except RuntimeError as exc:
                log.seek(0)
                raise RuntimeError(f"{exc}: {log.read().decode(errors='replace')}") from None
            yield Live(url, None, proc.pid)
        finally:
            stop(proc)
