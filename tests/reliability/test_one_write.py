"""The bounded protocol's own steps on every answer (mockserver.http.server): a whole answer
leaves in one write, a HEAD answer's head and a stream's head leave though no body follows
at once, and the keep-alive timeout is the connection's deadline, noticed by the sweep."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from mockserver.http.server import _Joined, uvicorn_config
from tests.support.live import free_port

# Set by the stream test once it has read the head: the frame waits for it, so the head can
# only have come on its own (no sleep to race).
FRAME = threading.Event()


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/stream":  # a head, then a frame only when the test says so
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        while not FRAME.is_set():
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"data: late\n\n", "more_body": False})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def _served(**overrides: Any) -> Iterator[int]:
    port = free_port()
    server = uvicorn.Server(uvicorn_config(_app, port=port, **overrides))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _read_until(sock: socket.socket, end: bytes, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    got = b""
    while end not in got:
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


class _Wire:
    """A transport that keeps each write apart."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


async def test_a_whole_answer_is_one_write_and_a_stream_head_leaves_within_the_turn() -> None:
    loop = asyncio.get_running_loop()
    done: list[bool] = []
    wire = _Wire()
    joined = _Joined(wire, loop, lambda: done.append(True))  # type: ignore[arg-type]
    joined.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    await asyncio.sleep(0)  # a turn of the loop: a head of known length waits for its body
    assert wire.writes == []
    joined.write(b"ok")
    joined.complete()
    assert wire.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"] and done == [True]
    stream = _Wire()
    joined = _Joined(stream, loop, lambda: None)  # type: ignore[arg-type]
    joined.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    assert stream.writes == []
    await asyncio.sleep(0)
    assert stream.writes == [b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"]
    head = _Wire()
    joined = _Joined(head, loop, lambda: None)  # type: ignore[arg-type]
    joined.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    joined.close()  # what is held leaves before the close
    assert head.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"] and head.closed


def test_a_head_answer_leaves_though_no_body_follows() -> None:
    with _served() as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"HEAD / HTTP/1.1\r\nhost: x\r\n\r\n")
        head = _read_until(sock, b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"content-length: 2\r\n" in head, head
        sock.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")  # and the connection goes on
        assert _read_until(sock, b"ok").endswith(b"\r\n\r\nok")


def test_a_streams_head_leaves_before_its_first_frame() -> None:
    with _served() as port, socket.create_connection(("127.0.0.1", port)) as sock:
        FRAME.clear()
        sock.sendall(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
        try:
            head = _read_until(sock, b"\r\n\r\n", timeout=10)  # a head held for its frame never comes
        finally:
            FRAME.set()
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"text/event-stream" in head, head
        assert b"data: late" in _read_until(sock, b"data: late")


def test_an_idle_kept_alive_connection_is_closed_after_its_keep_alive() -> None:
    with (
        _served(timeout_keep_alive=1) as port,
        socket.create_connection(("127.0.0.1", port)) as sock,
    ):
        sock.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        assert _read_until(sock, b"ok").endswith(b"ok")
        answered = time.monotonic()
        sock.settimeout(20)
        assert sock.recv(16) == b""  # closed by the server
        waited = time.monotonic() - answered
        assert 0.9 <= waited < 15, waited  # not before its keep-alive; a tick late at most, on a quiet machine
