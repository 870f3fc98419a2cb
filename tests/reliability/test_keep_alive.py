"""Regression (found by the load test): ``mockserver serve`` closed idle keep-alive connections
after uvicorn's default 5 s — exactly when httpx (and so the OpenAI SDK) still reuses them.
Under load a client's request crossed the server's close and got a TCP reset (httpx.ReadError,
"Connection reset by peer", on a reused connection while waiting for the headers)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.reliability.harness import child_server

HTTPX_KEEPALIVE_EXPIRY = 5.0  # httpx.Limits' default, which the OpenAI SDK keeps


def _ask(sock: socket.socket) -> bytes:
    sock.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        answer += chunk
    return answer


def test_an_idle_connection_outlives_the_clients_keepalive_expiry(tmp_path: Path) -> None:
    with child_server([], tmp_path / "server.log") as child:
        port = int(child.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            assert _ask(sock).startswith(b"HTTP/1.1 200")
            time.sleep(HTTPX_KEEPALIVE_EXPIRY + 0.5)  # an httpx pool would still reuse it now
            assert _ask(sock).startswith(b"HTTP/1.1 200"), "the server closed the idle connection"
