"""Real ``mockserver serve`` processes sharing one state, for the fleet tests.

Each node is started the way users start it (``python -m mockserver serve``), on ``--port 0``:
the port is read from the banner it prints once it listens. Output goes to a file, not a pipe
(a pipe nobody reads fills and stalls the server). Every process is stopped in a ``finally``;
nothing outlives the test that started it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai

ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")
SESSION = "x-mockserver-session"
MODEL = "gpt-4o-mini"

__all__ = ["MODEL", "SESSION", "Node", "fleet", "new_session", "start_node"]


@dataclass
class Node:
    """One server process."""

    proc: subprocess.Popen[bytes]
    log: Path
    port: int = 0
    name: str = ""
    _http: httpx.Client | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(base_url=self.url, timeout=15, trust_env=False)
        return self._http

    def client(self, session: str | None = None, api_key: str | None = None, **options: Any) -> openai.OpenAI:
        """The official SDK pointed at this node (no retries: a test sees every status)."""
        headers = {SESSION: session} if session else {}
        options.setdefault("max_retries", 0)
        options.setdefault("timeout", 15)
        return openai.OpenAI(
            base_url=f"{self.url}/v1",
            api_key=api_key or f"sk-{uuid.uuid4().hex[:12]}",
            default_headers=headers,
            **options,
        )

    def admin(self, method: str, path: str, session: str | None = None, **kwargs: Any) -> httpx.Response:
        """``/__mockserver/<path>`` over plain HTTP."""
        headers = {SESSION: session} if session else {}
        return self.http.request(method, f"/__mockserver/{path}", headers=headers, **kwargs)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self._http is not None:
            self._http.close()
            self._http = None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return int(self.proc.returncode)


def new_session() -> str:
    return f"fleet-{uuid.uuid4().hex[:10]}"


def start_node(args: Sequence[str], name: str = "node", env: dict[str, str] | None = None) -> Node:
    """Start one ``mockserver serve`` (not waiting for it: see :func:`wait_listening`)."""
    log = Path(tempfile.mkstemp(prefix=f"fleet-{name}-", suffix=".log")[1])
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MOCKSERVER_")}
    environ.update(env or {})
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mockserver", "serve", "--port", "0", *args],
            cwd=ROOT,
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Node(proc, log, name=name)


def wait_listening(node: Node, timeout: float = 60.0) -> Node:
    """Block until ``node`` prints its banner (then it answers); its port from the banner."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = LISTENING.search(node.output())
        if found:
            node.port = int(found.group(1))
            return node
        if node.proc.poll() is not None:
            raise RuntimeError(f"{node.name} exited with {node.proc.returncode}:\n{node.output()[-3000:]}")
        time.sleep(0.02)
    node.stop()
    raise RuntimeError(f"{node.name} did not listen within {timeout} s:\n{node.output()[-3000:]}")


@contextmanager
def fleet(count: int, args: Sequence[str]) -> Iterator[list[Node]]:
    """``count`` nodes with the same flags, started side by side; all stopped on exit."""
    nodes = [start_node(args, name=f"node{i}") for i in range(count)]
    try:
        for node in nodes:
            wait_listening(node)
        yield nodes
    finally:
        for node in nodes:
            node.stop()
            node.log.unlink(missing_ok=True)
