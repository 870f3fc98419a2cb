"""Bounded connections: the head timeout, the connection cap and a bounded shutdown.

A connection that sends nothing, or a request head a byte at a time, is closed once the head
timeout passes (uvicorn alone held 3,000 of them for ever); answers that take longer than the
timeout are not cut by it; beyond ``--max-connections`` a request is answered 503 in OpenAI's
envelope; and SIGTERM exits within the shutdown timeout even with a request in flight whose
client is gone. Each against a real server process.
"""

from __future__ import annotations

import select
import signal
import socket
import time
from pathlib import Path
from typing import Any

import httpx

from tests.reliability.conftest import Budget
from tests.reliability.harness import child_server

CHAT = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # a head not finished


def _scripted(tmp_path: Path, *args: str) -> list[str]:
    """A torch-free server that answers every request with one scripted text."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("- text: Hello there.\n")
    return ["--backend", "script", "--rules", str(rules), *args]


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=5)


def _closed_by_server(sockets: list[socket.socket], deadline: float) -> list[socket.socket]:
    """Wait until the server closed each socket (a read gives EOF or a reset) or ``deadline``;
    the sockets still open then."""
    open_ = list(sockets)
    while open_ and time.monotonic() < deadline:
        readable, _, _ = select.select(open_, [], [], 0.2)
        for sock in readable:
            try:
                data = sock.recv(4096)
            except (ConnectionResetError, TimeoutError):
                data = b""
            if not data:
                open_.remove(sock)
    return open_


def test_connections_that_send_no_whole_head_are_closed(
    tmp_path: Path, budget: Budget, figures: dict[str, Any]
) -> None:
    count = 1000 if budget.name == "full" else 150
    with child_server(_scripted(tmp_path, "--header-timeout", "1"), tmp_path / "server.log") as server:
        idle = [_connect(server.url) for _ in range(count // 2)]
        half = [_connect(server.url) for _ in range(count - count // 2)]
        for sock in half:
            sock.sendall(HEAD)
        kept = _connect(server.url)  # a kept-alive connection that starts a next request and stalls
        kept.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert kept.recv(4096).startswith(b"HTTP/1.1 200")
        kept.sendall(b"GET /health HTTP/1.1\r\n")
        started = time.monotonic()
        healthy = httpx.get(server.url + "/health", timeout=5)  # served meanwhile
        assert healthy.status_code == 200
        left = _closed_by_server([*idle, *half, kept], started + 10)
        took = time.monotonic() - started
        figures["connections closed by the 1 s head timeout"] = f"{count + 1} in {took:.2f} s"
        assert not left, f"{len(left)} of {count + 1} connections still open 10 s after a 1 s head timeout"
        for sock in [*idle, *half, kept]:
            sock.close()
        assert httpx.post(server.base_url + "/chat/completions", json=CHAT).status_code == 200


def test_an_answer_slower_than_the_head_timeout_is_not_cut(tmp_path: Path) -> None:
    with child_server(_scripted(tmp_path, "--header-timeout", "1"), tmp_path / "server.log") as server:
        slow = {"x-mockserver-fault": "latency.queue=2000"}
        with httpx.Client(timeout=10) as client:
            answer = client.post(server.base_url + "/chat/completions", json=CHAT, headers=slow)
            assert answer.status_code == 200
            time.sleep(1.5)  # idle on the kept-alive connection, past the head timeout: the keep-alive rules
            again = client.post(server.base_url + "/chat/completions", json={**CHAT, "stream": True}, headers=slow)
            assert again.status_code == 200 and again.text.endswith("data: [DONE]\n\n")


def test_requests_beyond_the_connection_cap_get_a_503_envelope(tmp_path: Path) -> None:
    with child_server(_scripted(tmp_path, "--max-connections", "10"), tmp_path / "server.log") as server:
        held = [_connect(server.url) for _ in range(10)]
        time.sleep(0.2)  # accepted by the server
        refused = httpx.post(server.base_url + "/chat/completions", json=CHAT, timeout=5)
        assert refused.status_code == 503
        error = refused.json()["error"]
        assert error["code"] == "overloaded" and "--max-connections" in error["message"]
        assert refused.headers["retry-after"] == "1" and refused.headers["x-should-retry"] == "true"
        for sock in held:
            sock.close()
        time.sleep(0.2)
        assert httpx.post(server.base_url + "/chat/completions", json=CHAT, timeout=5).status_code == 200


def test_sigterm_exits_within_the_shutdown_timeout_with_work_in_flight(tmp_path: Path, figures: dict[str, Any]) -> None:
    with child_server(_scripted(tmp_path), tmp_path / "idle.log") as server:
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=10)
        figures["idle exit after SIGTERM"] = f"{time.monotonic() - started:.2f} s"
    with child_server(_scripted(tmp_path, "--shutdown-timeout", "1"), tmp_path / "busy.log") as server:
        stuck = _connect(server.url)  # a request delayed a minute, its client gone quiet
        body = b'{"model":"m","messages":[{"role":"user","content":"Hi"}]}'
        stuck.sendall(
            HEAD + b"content-type: application/json\r\nx-mockserver-fault: latency.queue=60000\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        time.sleep(0.3)
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=30)
        took = time.monotonic() - started
        figures["exit after SIGTERM with a 60 s request in flight (--shutdown-timeout 1)"] = f"{took:.2f} s"
        assert took < 5, f"SIGTERM took {took:.1f} s with a 1 s shutdown timeout"
        stuck.close()
