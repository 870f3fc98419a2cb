"""``mockserver serve --workers N``: N processes on one port, one state; what start-up says when
the state cannot be had; the password of a state URL never shown."""

from __future__ import annotations

import concurrent.futures
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.fleet.harness import MODEL, ROOT, SESSION, new_session, start_node, wait_listening
from tests.support.redis_server import RedisServer, free_port

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _counted(metrics: str) -> int:
    chat = r'mockserver_requests_total\{endpoint="/v1/chat/completions",[^}]*status="200"[^}]*\} (\S+)'
    found = re.search(chat, metrics)
    return int(float(found.group(1))) if found else 0


@pytest.mark.parametrize("engine", ["redis", "sqlite"])
def test_two_workers_share_one_port_and_one_state(engine: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if engine == "redis":
        redis: RedisServer = request.getfixturevalue("redis")
        redis.flush()
        url = redis.url
    else:
        url = f"sqlite:{tmp_path / 'state.db'}"
    node = start_node(["--workers", "2", "--state", url, "--backend", "script"], name="workers")
    try:
        wait_listening(node)
        banner = node.output()
        assert "(2 workers)" in banner and f"state      {url} (shared)" in banner, banner
        session = new_session()
        assert node.admin("POST", "answers", session=session, json={"text": "one port"}).status_code == 200
        total = 64

        def ask(i: int) -> str:
            # A fresh connection each: the kernel hands each to whichever worker accepts first.
            body = {"model": MODEL, "messages": [{"role": "user", "content": f"ask {i}"}]}
            answer = httpx.post(node.url + CHAT, json=body, headers={SESSION: session}, timeout=15, trust_env=False)
            assert answer.status_code == 200, answer.text
            return str(answer.json()["choices"][0]["message"]["content"])

        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            assert set(pool.map(ask, range(total))) == {"one port"}  # the rule, whichever worker answered
        # The journal, read through any worker, has every request.
        for _ in range(4):
            entries = httpx.get(node.url + "/__mockserver/journal", params={"session": session}, trust_env=False)
            assert len([e for e in entries.json()["entries"] if e["path"] == CHAT]) == total
        # Each worker counts what it answered (its own /metrics): both answered, and between them all.
        workers = [pid for pid in _children(node.proc.pid) if b"spawn" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(workers) == 2, workers
        counts = {_counted(httpx.get(node.url + "/metrics", trust_env=False).text) for _ in range(40)}
        # Whichever worker a scrape reaches answered some requests but not all, so the other
        # answered the rest. (Both may have answered exactly half: then every scrape reads 32.)
        assert all(0 < count < total for count in counts), counts
        assert len(counts) == 1 or (len(counts) == 2 and sum(counts) == total), counts
        # Ctrl-C: the workers stop, the command exits 130 without a traceback.
        assert node.stop(signal.SIGINT) == 130
        assert "Traceback" not in node.output(), node.output()
        assert not any(_alive(pid) for pid in workers)
    finally:
        node.stop()
        node.log.unlink(missing_ok=True)


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MOCKSERVER_")}
    return subprocess.run(
        [sys.executable, "-m", "mockserver", "serve", "--port", "0", *args],
        cwd=ROOT,
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("where", ["flag", "env"])
def test_several_workers_on_memory_state_refuse_in_one_line(where: str) -> None:
    done = _serve("--workers", "2") if where == "flag" else _serve(env={"MOCKSERVER_WORKERS": "2"})
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("mockserver: invalid --workers")
    assert "--state sqlite:PATH" in done.stderr and "--state redis://" in done.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_unreachable_redis_at_start_up_is_one_line_without_the_password(workers: str) -> None:
    url = f"redis://:hunter2-secret@127.0.0.1:{free_port()}/0"  # nothing listens there
    done = _serve("--state", url, "--workers", workers)
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"redis://:***@127.0.0.1:{url.rsplit(':', 1)[1]}" in done.stderr, done.stderr
    assert "could not connect" in done.stderr and "Retry shortly" not in done.stderr, done.stderr  # nothing retries
    assert "hunter2" not in done.stderr + done.stdout


def test_the_password_of_the_state_url_is_never_shown() -> None:
    password = "s3cret-of-the-fleet"
    with RedisServer(password=password) as server:
        hidden = server.url.replace(password, "***")
        node = start_node(["--state", server.url, "--backend", "script", "--log-level", "debug"], name="secret")
        try:
            wait_listening(node)
            assert f"state      {hidden} (shared)" in node.output()
            health = node.http.get("/health")
            assert health.status_code == 200 and health.json() == {"status": "ok", "state": hidden}
            metrics = node.http.get("/metrics").text
            node.admin("POST", "answers", json={"text": "x"})
            node.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
            server.stop()  # the errors while it is down must not name it either
            down = node.http.get("/health")
            assert down.status_code == 503 and down.json()["state"] == hidden
            body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}]}
            failed = node.http.post("/v1/chat/completions", json=body)
            assert password not in failed.text
        finally:
            node.stop()
        everything = node.output() + metrics + health.text + down.text
        node.log.unlink(missing_ok=True)
    assert password not in everything


def test_a_refused_password_at_start_up_is_one_line_without_it() -> None:
    with RedisServer(password="the-right-one") as server:
        wrong = server.url.replace("the-right-one", "not-the-right-one")
        done = _serve("--state", wrong)
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"redis://:***@127.0.0.1:{server.port}/0" in done.stderr, done.stderr
    assert "right-one" not in done.stderr + done.stdout
