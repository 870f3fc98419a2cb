"""The Redis client (mockserver/state/resp.py) against a real redis-server: replies of every
type with both parsers, pipelining, logging in, databases, TLS, and every way a connection
fails — refused, lost mid-command, never answering — which must end in StateUnavailable with
the password hidden, and in service again once Redis is back.
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

import pytest

from mockserver.state import resp

try:
    import hiredis
except ImportError:  # the pure parser alone
    hiredis = None  # type: ignore[assignment]
from mockserver.state.base import StateUnavailable
from mockserver.state.resp import Address, BlockingClient, Client, PyReader, ReplyError, Script, encode
from tests.support.redis_server import RedisServer, binary, free_port

PARSERS = ["hiredis", "pure"]


@pytest.fixture(params=PARSERS)
def pure(request: pytest.FixtureRequest) -> bool:
    if request.param == "hiredis" and hiredis is None:
        pytest.skip("hiredis is not installed")
    return bool(request.param == "pure")


@pytest.fixture
async def client(redis_server: RedisServer, pure: bool) -> AsyncIterator[Client]:
    redis_server.flush()
    made = Client(redis_server.url, pure=pure)
    yield made
    await made.close()


@pytest.fixture(scope="module")
def guarded() -> Iterator[RedisServer]:
    """A server with a password (module-wide: these tests also stop and start it)."""
    if binary() is None:
        pytest.skip("no redis-server")
    with RedisServer(password="s3cr3t-pw") as server:
        yield server


# ---- replies -------------------------------------------------------------------------------


async def test_every_reply_type(client: Client) -> None:
    assert await client.call("PING") == b"PONG"
    assert await client.call("SET", "k", b"a\r\nb\x00") == b"OK"
    assert await client.call("GET", "k") == b"a\r\nb\x00"
    assert await client.call("GET", "missing") is None
    assert await client.call("SET", "empty", b"") == b"OK" and await client.call("GET", "empty") == b""
    assert await client.call("INCRBY", "n", -7) == -7
    assert await client.call("MGET", "k", "missing", "n") == [b"a\r\nb\x00", None, b"-7"]
    big = bytes(range(256)) * 8192  # 2 MiB: read in many chunks
    assert await client.call("SET", "big", big) == b"OK" and await client.call("GET", "big") == big
    nested = Script("return {1, {'a', {2}}, redis.status_reply('FINE'), false}")
    assert await client.run(nested) == [1, [b"a", [2]], b"FINE", None]
    assert await client.call("LRANGE", "nothing", 0, -1) == []
    assert await client.call("SET", "float", 0.1 + 0.2) == b"OK"
    assert float(await client.call("GET", "float")) == 0.1 + 0.2  # repr: the same double back


async def test_an_error_reply_is_not_an_outage(client: Client) -> None:
    await client.call("SET", "text", "x")
    with pytest.raises(ReplyError, match="not an integer"):
        await client.call("INCR", "text")
    with pytest.raises(ReplyError, match="WRONGTYPE"):
        await client.pipeline(("INCR", "n"), ("LPUSH", "text", "y"), ("INCR", "n"))
    assert await client.call("GET", "n") == b"2"  # every command of the pipeline ran
    assert await client.call("PING") == b"PONG"  # and the connection stayed up


async def test_pipelining_keeps_replies_in_order(client: Client) -> None:
    async def one(i: int) -> None:
        await client.call("SET", f"k{i}", f"v{i}")
        assert await client.call("GET", f"k{i}") == f"v{i}".encode()

    counts = await asyncio.gather(*(client.call("INCR", "count") for _ in range(200)))
    assert counts == list(range(1, 201))
    await asyncio.gather(*(one(i) for i in range(200)))
    batches = await asyncio.gather(*(client.pipeline(("INCR", "b"), ("GET", f"k{i}")) for i in range(100)))
    assert [reply[1] for reply in batches] == [f"v{i}".encode() for i in range(100)]
    assert sorted(reply[0] for reply in batches) == list(range(1, 101))
    assert await client.pipeline() == []


async def test_scripts_survive_a_script_flush(client: Client) -> None:
    script = Script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    assert await client.run(script, ["s"], [2]) == 2
    await client.call("SCRIPT", "FLUSH")  # as a restarted Redis: EVALSHA says NOSCRIPT, EVAL follows
    assert await client.run(script, ["s"], [3]) == 5
    assert await client.call("SCRIPT", "EXISTS", script.sha) == [1]
    with pytest.raises(ReplyError):
        await client.run(Script("return redis.call('NOPE')"))


def test_the_pure_parser_reads_byte_by_byte() -> None:
    stream = (
        b"+OK\r\n-ERR bad thing\r\n:42\r\n$-1\r\n$0\r\n\r\n$5\r\na\r\nbc\r\n*-1\r\n*0\r\n"
        b"*3\r\n:1\r\n*2\r\n$1\r\nx\r\n$-1\r\n+s\r\n"
    )
    reader = PyReader()
    replies = []
    for i in range(len(stream)):
        reader.feed(stream[i : i + 1])
        while (reply := reader.gets()) is not False:
            replies.append(reply)
    error = replies.pop(1)
    assert isinstance(error, ReplyError) and str(error) == "ERR bad thing"
    assert replies == [b"OK", 42, None, b"", b"a\r\nbc", None, [], [1, [b"x", None], b"s"]]
    if hiredis is not None:  # the same bytes, the same replies from hiredis
        fast = hiredis.Reader(replyError=ReplyError)
        fast.feed(stream)
        got = [fast.gets() for _ in range(9)]
        assert [r for i, r in enumerate(got) if i != 1] == replies and fast.gets() is False
    bad = PyReader()
    bad.feed(b"?what\r\n")
    with pytest.raises(ValueError):
        bad.gets()


def test_encoding() -> None:
    assert (
        encode(["SET", b"k", 1, 0.5, "é"])
        == b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n1\r\n$3\r\n0.5\r\n$2\r\n\xc3\xa9\r\n"
    )


# ---- logging in and choosing a database -------------------------------------------------------


def test_urls() -> None:
    plain = Address.parse("redis://localhost")
    assert (plain.host, plain.port, plain.db, plain.password, plain.tls) == ("localhost", 6379, 0, None, None)
    assert plain.hello() == []
    full = Address.parse("redis://al%40ice:p%3Ass@10.0.0.1:7000/5")
    assert (full.username, full.password, full.db) == ("al@ice", "p:ss", 5)
    assert full.hello() == [("AUTH", "al@ice", "p:ss"), ("SELECT", 5)]
    assert Address.parse("redis://:pw@h/0").hello() == [("AUTH", "pw")]
    secure = Address.parse("rediss://h:1/0?ssl_cert_reqs=none")
    assert secure.tls is not None and not secure.tls.check_hostname
    assert Address.parse("rediss://h").tls is not None and Address.parse("rediss://h").tls.check_hostname  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="ssl_ca_certs"):
        Address.parse("rediss://h/0?ssl_ca_certs=/no/such/file.pem")
    with pytest.raises(ValueError, match=r"\*\*\*") as bad:
        Address.parse("redis://:hunter2@h:port/0")
    assert "hunter2" not in str(bad.value)


@pytest.mark.parametrize("pure", [False, True], ids=PARSERS)
async def test_a_password_and_a_wrong_one(guarded: RedisServer, pure: bool) -> None:
    good = Client(guarded.url, pure=pure)
    bad = Client(guarded.url.replace("s3cr3t-pw", "wrong-pw"), pure=pure)
    none = Client(guarded.url.replace(":s3cr3t-pw@", ""), pure=pure)
    try:
        assert await good.call("SET", "x", "1") == b"OK"
        with pytest.raises(StateUnavailable) as refused:
            await bad.call("GET", "x")
        message = refused.value.message
        assert "WRONGPASS" in message and "redis://:***@127.0.0.1" in message
        assert "wrong-pw" not in message and "s3cr3t-pw" not in message
        assert refused.value.status == 503 and refused.value.headers["x-should-retry"] == "true"
        with pytest.raises(StateUnavailable, match="NOAUTH"):
            await none.call("GET", "x")
    finally:
        for made in (good, bad, none):
            await made.close()


async def test_an_acl_user_and_a_database(redis_server: RedisServer) -> None:
    redis_server.flush()
    admin = Client(redis_server.url)
    await admin.call("ACL", "SETUSER", "alice", "on", ">alice-pw", "~*", "&*", "+@all")
    alice = Client(f"redis://alice:alice-pw@127.0.0.1:{redis_server.port}/3")
    try:
        assert await alice.call("ACL", "WHOAMI") == b"alice"
        await alice.call("SET", "where", "db3")
        assert await admin.call("GET", "where") is None  # db 0
        await admin.call("SELECT", 3)  # (this connection only)
        assert await admin.call("GET", "where") == b"db3"
        with pytest.raises(StateUnavailable, match="WRONGPASS"):
            await Client(f"redis://alice:nope@127.0.0.1:{redis_server.port}/3").call("PING")
    finally:
        await admin.call("ACL", "DELUSER", "alice")
        await alice.close()
        await admin.close()


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
        trusting = Client(f"rediss://:tls-pw@127.0.0.1:{port}/1?ssl_ca_certs={tmp_path / 'cert.pem'}")
        anything = Client(f"rediss://:tls-pw@127.0.0.1:{port}/1?ssl_cert_reqs=none")
        strict = Client(f"rediss://:tls-pw@127.0.0.1:{port}/1")  # a self-signed certificate: refused
        try:
            assert await trusting.call("SET", "t", "1") == b"OK"
            assert await anything.call("GET", "t") == b"1"
            with pytest.raises(StateUnavailable, match="could not connect") as refused:
                await strict.call("PING")
            assert "tls-pw" not in refused.value.message
            blocking = BlockingClient(f"rediss://:tls-pw@127.0.0.1:{port}/1?ssl_cert_reqs=none")
            assert blocking.call("GET", "t") == b"1"
            blocking.close()
        finally:
            for made in (trusting, anything, strict):
                await made.close()
    finally:
        process.kill()
        process.wait()


# ---- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize("pure", [False, True], ids=PARSERS)
async def test_lost_and_found_again(guarded: RedisServer, pure: bool) -> None:
    client = Client(guarded.url, pure=pure)
    try:
        assert await client.call("SET", "k", "v") == b"OK"
        blocked = asyncio.ensure_future(client.call("BLPOP", "never", 0))  # in flight when Redis dies
        await asyncio.sleep(0.05)
        guarded.stop()
        with pytest.raises(StateUnavailable) as lost:
            await asyncio.wait_for(blocked, 1)  # at once, not after the command timeout
        for failure in (lost.value, *[await _failure(client) for _ in range(3)]):
            assert "redis://:***@127.0.0.1" in failure.message and "s3cr3t-pw" not in failure.message
        guarded.start()
        back = time.monotonic()
        while True:
            try:
                assert await client.call("PING") == b"PONG"
                break
            except StateUnavailable:
                assert time.monotonic() - back < 2, "not back within the back-off (0.5 s at most)"
                await asyncio.sleep(0.02)
        assert await client.call("SET", "k", "again") == b"OK"
    finally:
        await client.close()
        if guarded.process is None:
            guarded.start()


async def _failure(client: Client) -> StateUnavailable:
    try:
        await client.call("PING")
    except StateUnavailable as exc:
        return exc
    raise AssertionError("Redis answered while stopped")


async def test_a_dead_redis_is_not_hammered() -> None:
    port = free_port()
    client = Client(f"redis://:pw@127.0.0.1:{port}/0")
    started = time.monotonic()
    failures = 0
    tries = 0
    real = client._open

    async def counted(loop: asyncio.AbstractEventLoop) -> resp._Connection:
        nonlocal tries
        tries += 1
        return await real(loop)

    client._open = counted  # type: ignore[method-assign]
    while time.monotonic() - started < 1.0:
        with pytest.raises(StateUnavailable, match="could not connect"):
            await client.call("PING")
        failures += 1
        await asyncio.sleep(0.005)
    assert failures > 50 and 2 <= tries <= 1.0 / resp.BACKOFF_MIN  # fast failures, few attempts
    await client.close()


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


@pytest.fixture
def silent() -> Iterator[_Silent]:
    server = _Silent()
    yield server
    server.close()


async def test_a_command_that_gets_no_reply_times_out(silent: _Silent) -> None:
    client = Client(f"redis://127.0.0.1:{silent.port}/0", timeout=0.3)
    try:
        started = time.monotonic()
        results = await asyncio.gather(*(client.call("GET", "k") for _ in range(5)), return_exceptions=True)
        assert 0.25 < time.monotonic() - started < 3
        assert all(isinstance(r, StateUnavailable) and "no reply within 0.3 s" in r.message for r in results)
    finally:
        await client.close()


async def test_a_login_that_gets_no_reply_times_out(silent: _Silent) -> None:
    client = Client(f"redis://:pw@127.0.0.1:{silent.port}/2", connect_timeout=0.3, timeout=5)
    try:
        started = time.monotonic()
        with pytest.raises(StateUnavailable, match=r"could not connect within 0.3 s") as late:
            await client.call("PING")
        assert time.monotonic() - started < 3 and ":***@" in late.value.message
    finally:
        await client.close()


def test_the_blocking_client(guarded: RedisServer, silent: _Silent) -> None:
    client = BlockingClient(guarded.url)
    assert client.pipeline(("SET", "b", "1"), ("INCR", "b")) == [b"OK", 2]
    with pytest.raises(ReplyError):
        client.call("LPUSH", "b", "x")
    guarded.stop()
    try:
        with pytest.raises(StateUnavailable, match=r"\*\*\*"):
            client.call("GET", "b")
    finally:
        guarded.start()
    assert client.call("GET", "b") is None  # back (and empty: no persistence)
    client.close()
    mute = BlockingClient(f"redis://127.0.0.1:{silent.port}/0", timeout=0.2)
    with pytest.raises(StateUnavailable, match="timed out"):
        mute.call("PING")


# ---- event loops ------------------------------------------------------------------------------


def test_one_client_many_loops(redis_server: RedisServer) -> None:
    """A server's loop in a thread and a test's own loops, one after another and at once."""
    redis_server.flush()
    client = Client(redis_server.url)

    async def count(times: int) -> int:
        last = 0
        for _ in range(times):
            last = await client.call("INCR", "loops")
        await client.release()  # this loop ends: its connection goes with it
        return int(last)

    assert asyncio.run(count(10)) == 10
    assert asyncio.run(count(10)) == 20  # a new loop: a new connection, the old one let go
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(asyncio.run(count(100)))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(results) == 320
    assert asyncio.run(count(1)) == 321
    asyncio.run(client.close())
