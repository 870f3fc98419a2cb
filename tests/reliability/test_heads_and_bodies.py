"""Request heads bounded in size, request bodies in time (issue 34, item 2).

* A head past 64 KiB (one header value streamed on and on) is answered 431 in OpenAI's
  envelope and its connection closed, with httptools (which has no limit of its own: the
  issue's client sent ~50 MB in 5 s and got a 200) and with h11 alike; a 40 KB head, and a
  1 MB body sent in one write, are still served.
* A body trickled a byte at a time is answered 408 once ``--body-timeout`` has passed since
  its head, so ``--max-connections`` such clients no longer lock everyone else out.

``/health`` is probed on its own connection meanwhile (its p99 is a figure, never asserted).
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.http.server import MAX_HEAD_BYTES, _bounded_protocol, uvicorn_config
from tests.reliability.conftest import Budget
from tests.reliability.harness import HealthProbe, child_server, error_envelope, proc_status
from tests.support.live import free_port, wait_healthy

CHAT = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


@contextmanager
def _served(parser: str) -> Iterator[str]:
    """A scripted-answer app under the bounded protocol built on ``parser``, in a thread."""
    if parser == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base
    else:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base  # type: ignore[assignment]
    app = create_app(Settings(backend="script", frozen_time=1_700_000_000.0))
    app.state.ctx.script.add(text="Hello there.")
    port = free_port()
    config = uvicorn_config(app, port=port, http=_bounded_protocol(Base, 10.0, 1000, 2.0))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _answer(sock: socket.socket, deadline: float) -> bytes:
    """Everything the server sends until it closes the connection (or ``deadline``)."""
    got = b""
    while time.monotonic() < deadline:
        readable, _, _ = select.select([sock], [], [], 0.2)
        if not readable:
            continue
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not data:
            break
        got += data
    return got


def _parsed(raw: bytes) -> tuple[int, dict[str, str], Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, json.loads(body)


def _stream_a_header(url: str, total: int) -> bytes:
    """One header value streamed ``total`` bytes long, 16 KiB a write, until the server stops it."""
    sock = _connect(url)
    try:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nx-big: ")
        piece = b"a" * (16 * 1024)
        with_reply = b""
        for _ in range(total // len(piece)):
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
        with_reply = _answer(sock, time.monotonic() + 15)
        return with_reply
    finally:
        sock.close()


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_a_head_past_64_kib_is_a_431(parser: str, budget: Budget, figures: dict[str, Any]) -> None:
    total = (50 if budget.name == "full" else 4) * 1024 * 1024
    with _served(parser) as url:
        big_but_fine = httpx.post(url + "/v1/chat/completions", json=CHAT, headers={"x-note": "n" * 40_000})
        assert big_but_fine.status_code == 200
        body = {**CHAT, "metadata": {"k": "v" * 500}, "user": "u" * 1_000_000}
        assert httpx.post(url + "/v1/chat/completions", json=body, timeout=30).status_code == 200
        with HealthProbe(url) as probe:
            for _ in probe.rounds(3, samples=30):
                raw = _stream_a_header(url, total)
                assert raw, "the connection was closed without an answer"
                status, headers, payload = _parsed(raw)
                assert status == 431, raw[:300]
                assert headers.get("connection") == "close"
                error = error_envelope(payload)
                assert error["code"] == "request_header_fields_too_large" and str(MAX_HEAD_BYTES) in error["message"]
        probe.check()
        assert httpx.post(url + "/v1/chat/completions", json=CHAT).status_code == 200
        figures[f"{parser}: /health while heads of {total >> 20} MB were refused"] = probe.figures()


def test_a_trickled_body_is_a_408_after_the_body_timeout(tmp_path: Path, figures: dict[str, Any]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("- text: Hello there.\n")
    args = ["--backend", "script", "--rules", str(rules), "--body-timeout", "1", "--max-connections", "8"]
    with child_server(args, tmp_path / "server.log") as server:
        rss_before = proc_status(server.pid, "VmRSS")
        body = json.dumps(CHAT).encode()
        head = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n" % len(body)
        )
        # Every connection the server takes but the probe's: without the timeout they are held for ever.
        sockets = [_connect(server.url) for _ in range(7)]
        for sock in sockets:
            sock.sendall(head + body[:1])
        answers: list[bytes] = []
        with HealthProbe(server.url) as probe:
            deadline = time.monotonic() + 20
            answered: set[socket.socket] = set()
            for i in range(1, len(body)):  # a byte every 0.3 s to each connection not yet answered
                if time.monotonic() > deadline:
                    break
                waiting = [sock for sock in sockets if sock not in answered]
                for sock in waiting:
                    try:
                        sock.sendall(body[i : i + 1])
                    except (BrokenPipeError, ConnectionResetError):
                        continue
                # The pace holds whatever the server does: the whole body would take ~20 s, far
                # past --body-timeout, so no connection can finish it (a loaded machine included).
                time.sleep(0.3)
                readable, _, _ = select.select(waiting, [], [], 0)
                answered.update(readable)
                if len(answered) == len(sockets):
                    break  # every one has been answered
            for sock in sockets:
                answers.append(_answer(sock, time.monotonic() + 10))
                sock.close()
        probe.check()
        for raw in answers:
            status, headers, payload = _parsed(raw)
            assert status == 408 and headers.get("connection") == "close", raw[:300]
            error = error_envelope(payload)
            assert error["code"] == "request_timeout" and "--body-timeout" in error["message"]
        assert httpx.post(server.base_url + "/chat/completions", json=CHAT, timeout=10).status_code == 200
        figures["/health while 7 trickled bodies held every other connection"] = probe.figures()
        figures["server RSS growth (kB)"] = proc_status(server.pid, "VmRSS") - rss_before
