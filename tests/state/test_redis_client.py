"""The Redis engine's link to redis-py (mockserver/state/redis/client.py) against a real
redis-server: what each URL names, scripts, logging in, TLS, event loops, and every way a
connection fails — refused, lost mid-command, never answering — which must end in
StateUnavailable with the password hidden, and in service again once Redis is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.exceptions import ResponseError

from mockserver.state.base import StateUnavailable
from mockserver.state.redis.client import BACKOFF_MAX, Link, Script, guarded, target
from tests.support.redis_server import RedisServer, binary, free_port


class Engine:
    """The least engine: commands through a Link, failures guarded as the engines' are."""

    def __init__(self, url: str, **options: Any) -> None:
        self._link = Link(url, **options)

    @guarded
    async def call(self, *args: Any) -> Any:
        return await self._link.client().execute_command(*args)

    @guarded
    async def run(self, script: Script, keys: list[Any], args: list[Any]) -> Any:
        return await script.run(self._link.client(), keys, args)

    async def close(self) -> None:
        await self._link.close()


@pytest.fixture
async def engine(redis_server: RedisServer) -> AsyncIterator[Engine]:
    redis_server.flush()
    made = Engine(redis_server.url)
    yield made
    await made.close()


@pytest.fixture(scope="module")
def guarded_server() -> Iterator[RedisServer]:
    """A server with a password (module-wide: these tests also stop and start it)."""
    if binary() is None:
        pytest.skip("no redis-server")
    with RedisServer(password="s3cr3t-pw") as server:
        yield server


# ---- URLs ---------------------------------------------------------------------------------------


def test_what_each_url_names() -> None:
    assert target("redis://:pw@h:1/2").kind == "single"
    cluster = target("rediss+cluster://al%40ice:p%3Ass@10.0.0.1:7000,10.0.0.2:7001?ssl_cert_reqs=none")
    assert cluster.kind == "cluster" and cluster.nodes == (("10.0.0.1", 7000), ("10.0.0.2", 7001))
    assert cluster.options["username"] == "al@ice" and cluster.options["password"] == "p:ss"
    assert cluster.options["ssl"] and cluster.options["ssl_cert_reqs"] == "none" and "db" not in cluster.options
    sentinel = target("redis+sentinel://:pw@s1:26379,s2:26379/primary/3")
    assert (sentinel.kind, sentinel.service, sentinel.options["db"]) == ("sentinel", "primary", 3)
    for bad, says in (
        ("redis://:hunter2@h:port/0", "bad port"),
        ("redis+cluster://:hunter2@h,h:2", "HOST:PORT"),
        ("redis+cluster://:hunter2@h:1/4", "database 0 only"),
        ("redis+sentinel://:hunter2@h:1", "SERVICE"),
        ("redis+nope://:hunter2@h:1", "not a redis"),
    ):
        with pytest.raises(ValueError, match=says) as caught:
            target(bad)
        assert "hunter2" not in str(caught.value) and "***" in str(caught.value)


# ---- commands and scripts -------------------------------------------------------------------------


async def test_an_error_reply_is_not_an_outage(engine: Engine) -> None:
    await engine.call("SET", "text", "x")
    with pytest.raises(ResponseError, match="not an integer"):
        await engine.call("INCR", "text")
    assert await engine.call("PING") == b"PONG"  # the connection stayed up, no back-off
    assert not engine._link.retry_at


async def test_scripts_survive_a_script_flush(engine: Engine) -> None:
    script = Script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    assert await engine.run(script, ["s"], [2]) == 2
    await engine.call("SCRIPT", "FLUSH")  # as a restarted Redis: EVALSHA says NOSCRIPT, EVAL follows
    assert await engine.run(script, ["s"], [3]) == 5
    assert await engine.call("SCRIPT", "EXISTS", script.sha) == [1]
    with pytest.raises(ResponseError):
        await engine.run(Script("return redis.call('NOPE')"), [], [])


# ---- logging in -------------------------------------------------------------------------------


async def test_a_password_and_a_wrong_one(guarded_server: RedisServer) -> None:
    good = Engine(guarded_server.url)
    bad = Engine(guarded_server.url.replace("s3cr3t-pw", "wrong-pw"))
    none = Engine(guarded_server.url.replace(":s3cr3t-pw@", ""))
    try:
        assert await good.call("SET", "x", "1") == b"OK"
        with pytest.raises(StateUnavailable) as refused:
            await bad.call("GET", "x")
        message = refused.value.message
        assert "redis://:***@127.0.0.1" in message and "wrong-pw" not in message and "s3cr3t-pw" not in message
        assert refused.value.status == 503 and refused.value.headers["x-should-retry"] == "true"
        with pytest.raises(StateUnavailable, match=r"(?i)auth"):
            await none.call("GET", "x")
    finally:
        for made in (good, bad, none):
            await made.close()


def _tls_server(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    if shutil.which("openssl") is None or binary() is None:
        pytest.skip("needs openssl and redis-server")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(folder / "key.pem"), "-out", str(folder / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    port = free_port()
    process = subprocess.Popen(
        [str(binary()), "--port", "0", "--tls-port", str(port), "--tls-cert-file", str(folder / "cert.pem"),
         "--tls-key-file", str(folder / "key.pem"), "--tls-auth-clients", "no", "--save", "", "--dir", str(folder),
         "--requirepass", "tls-pw"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while True:
        if process.poll() is not None:
            pytest.skip("this redis-server was built without TLS")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return process, port
        assert time.monotonic() < deadline
        time.sleep(0.02)


async def test_tls(tmp_path: Path) -> None:
    process, port = _tls_server(tmp_path)
    try:
        trusting = Engine(f"rediss://:tls-pw@127.0.0.1:{port}/1?ssl_ca_certs={tmp_path / 'cert.pem'}")
        anything = Engine(f"rediss://:tls-pw@127.0.0.1:{port}/1?ssl_cert_reqs=none")
        strict = Engine(f"rediss://:tls-pw@127.0.0.1:{port}/1")  # a self-signed certificate: refused
        try:
            assert await trusting.call("SET", "t", "1") == b"OK"
            assert await anything.call("GET", "t") == b"1"
            with pytest.raises(StateUnavailable) as refused:
                await strict.call("PING")
            assert "tls-pw" not in refused.value.message
            blocking = Link(f"rediss://:tls-pw@127.0.0.1:{port}/1?ssl_cert_reqs=none").blocking()
            assert blocking.get("t") == b"1"
            blocking.close()
        finally:
            for made in (trusting, anything, strict):
                await made.close()
    finally:
        process.kill()
        process.wait()


# ---- failures ---------------------------------------------------------------------------------


async def test_lost_and_found_again(guarded_server: RedisServer) -> None:
    engine = Engine(guarded_server.url)
    try:
        assert await engine.call("SET", "k", "v") == b"OK"
        blocked = asyncio.ensure_future(engine.call("BLPOP", "never", 1.5))  # in flight when Redis dies
        await asyncio.sleep(0.05)
        guarded_server.stop()
        with pytest.raises(StateUnavailable) as lost:
            await asyncio.wait_for(blocked, 1)  # at once, not after the command timeout
        for failure in (lost.value, *[await _failure(engine) for _ in range(3)]):
            assert "redis://:***@127.0.0.1" in failure.message and "s3cr3t-pw" not in failure.message
        guarded_server.start()
        back = time.monotonic()
        while True:
            try:
                assert await engine.call("PING") == b"PONG"
                break
            except StateUnavailable:
                assert time.monotonic() - back < 2, f"not back within the back-off ({BACKOFF_MAX} s at most)"
                await asyncio.sleep(0.02)
        assert await engine.call("SET", "k", "again") == b"OK"
    finally:
        await engine.close()
        if guarded_server.process is None:
            guarded_server.start()


async def _failure(engine: Engine) -> StateUnavailable:
    try:
        await engine.call("PING")
    except StateUnavailable as exc:
        return exc
    raise AssertionError("Redis answered while stopped")


async def test_a_dead_redis_is_not_hammered(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(f"redis://:pw@127.0.0.1:{free_port()}/0")
    tries = 0
    real = asyncio.open_connection

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal tries
        tries += 1
        return await real(*args, **kwargs)

    monkeypatch.setattr(asyncio, "open_connection", counted)
    started, failures = time.monotonic(), 0
    while time.monotonic() - started < 1.0:
        with pytest.raises(StateUnavailable, match="connect"):
            await engine.call("PING")
        failures += 1
        await asyncio.sleep(0.005)
    assert failures > 50 and 2 <= tries <= 1.0 / 0.05  # fast failures, few attempts
    await engine.close()


class _Silent:
    """A TCP server that accepts connections and never says a word."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.accepted.append(self.sock.accept()[0])

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


async def test_a_command_that_gets_no_reply_times_out() -> None:
    silent = _Silent()
    engine = Engine(f"redis://127.0.0.1:{silent.port}/0", timeout=0.3)
    try:
        started = time.monotonic()
        results = await asyncio.gather(*(engine.call("GET", "k") for _ in range(5)), return_exceptions=True)
        assert 0.25 < time.monotonic() - started < 3
        assert all(isinstance(r, StateUnavailable) and "redis://127.0.0.1" in r.message for r in results), results
    finally:
        await engine.close()
        silent.close()


# ---- event loops ------------------------------------------------------------------------------


def test_one_link_many_loops(redis_server: RedisServer) -> None:
    """A server's loop in a thread and a test's own loops, one after another and at once."""
    redis_server.flush()
    engine = Engine(redis_server.url)

    async def count(times: int) -> int:
        last = 0
        for _ in range(times):
            last = await engine.call("INCR", "loops")
        await engine._link.release()  # this loop ends: its client goes with it
        return int(last)

    assert asyncio.run(count(10)) == 10
    assert asyncio.run(count(10)) == 20  # a new loop: a new client, the old one let go
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(asyncio.run(count(100)))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(results) == 320
    assert asyncio.run(count(1)) == 321
    asyncio.run(engine.close())
