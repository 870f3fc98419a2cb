"""Recordings on a disk that fails (issue 34, item 1): a full tmpfs and a read-only one.

A recording server (a child process) proxies to an upstream (a server in this process, whose
journal counts what reached it) and records into a small tmpfs mounted for the test. A
recording that cannot be written is a 507 in OpenAI's envelope naming the cassette and the OS
error, with ``x-should-retry: false``, *before* the upstream is asked when the disk is already
full or read-only, and never a 200 claiming ``record``; when only the write at the end fails
(the answer outgrew the room), a stream gets an in-band error before any ``[DONE]`` and a whole
body the 507. The cassette recorded before stays byte for byte as it was, ``/health`` answers
throughout (its p99 is a figure), and the server records again once the disk has room.

Mounting needs root (CAP_SYS_ADMIN); elsewhere the tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.reliability.conftest import Budget
from tests.reliability.harness import Child, HealthProbe, child_server, error_envelope, frames, thread_server

CASSETTE = "mockserver.yaml"
KB = 1024


@contextmanager
def tmpfs(where: Path, size_kb: int) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k,mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def _remount(where: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True, capture_output=True)


def _fill(where: Path) -> Path:
    """Fill the filesystem to the last block; the filler file is returned (unlink it to free)."""
    filler = where / ".filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for size in (64 * KB, 4 * KB, 1):  # big writes, then smaller, to the very last byte
            with suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    return filler


def _chat(text: str, stream: bool = False) -> dict[str, Any]:
    # "big": the whole scripted text (~400 KB) in one body; streamed, 3,000 events (~450 KB).
    tokens = (3000 if stream else None) if text == "big" else 8
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": text}], "stream": stream}
    return body if tokens is None else {**body, "max_tokens": tokens}


def _upstream_calls(url: str) -> int:
    return len(httpx.get(url + "/__mockserver/journal", timeout=30).json()["entries"])


def _check_507(answer: httpx.Response, reason: str) -> dict[str, Any]:
    assert answer.status_code == 507, answer.text[:500]
    assert answer.headers.get("x-should-retry") == "false"
    assert answer.headers.get("x-mockserver-source") != "record", "a failed recording claims 'record'"
    error = error_envelope(answer.json())
    assert error["code"] == "cassette_write_failed"
    assert CASSETTE in error["message"] and reason in error["message"], error["message"]
    return error


@contextmanager
def _servers(directory: Path) -> Iterator[tuple[str, Child]]:
    settings = Settings(frozen_time=1_700_000_000.0, backend="script", context_window=400_000)
    with thread_server(create_app(settings)) as upstream:
        url = upstream.live.url
        rules = [{"match": "big", "text": "word " * 80_000}, {"text": "A recorded answer."}]
        httpx.post(url + "/__mockserver/answers", json=rules, timeout=30).raise_for_status()
        args = ["--cassettes", str(directory), "--record-mode", "all", "--upstream", url]
        with child_server(args, directory.parent / "recorder.log") as child:
            yield url, child


def test_a_full_disk_is_a_507_before_the_upstream_is_asked(
    tmp_path: Path, figures: dict[str, Any], budget: Budget
) -> None:
    with tmpfs(tmp_path / "disk", 1024) as disk, _servers(disk) as (upstream, child):
        client = httpx.Client(base_url=child.base_url, timeout=60)
        first = client.post("/chat/completions", json=_chat("the first one"))
        assert first.status_code == 200 and first.headers["x-mockserver-source"] == "record"
        before = (disk / CASSETTE).read_bytes()
        filler = _fill(disk)
        calls = _upstream_calls(upstream)
        rounds = 40 if budget.name == "full" else 8
        with HealthProbe(child.url) as probe:
            for i in probe.rounds(rounds):
                for stream in (False, True):
                    answer = client.post("/chat/completions", json=_chat(f"full {i}", stream))
                    error = _check_507(answer, "No space left on device")
                    assert "upstream was not asked" in error["message"]
        probe.check()
        assert _upstream_calls(upstream) == calls, "the upstream was asked for a recording that could not be kept"
        assert (disk / CASSETTE).read_bytes() == before, "the earlier cassette changed"
        assert not [p.name for p in disk.iterdir() if p.name.endswith((".tmp", ".reserve"))]
        filler.unlink()
        again = client.post("/chat/completions", json=_chat("room again"))
        assert again.status_code == 200 and again.headers["x-mockserver-source"] == "record"
        assert (disk / CASSETTE).read_bytes().startswith(before)
        figures["full disk: /health during 507s"] = probe.figures()


def test_a_read_only_disk_is_a_507_and_the_cassette_is_kept(tmp_path: Path, figures: dict[str, Any]) -> None:
    with tmpfs(tmp_path / "disk", 1024) as disk, _servers(disk) as (upstream, child):
        client = httpx.Client(base_url=child.base_url, timeout=60)
        assert client.post("/chat/completions", json=_chat("kept")).status_code == 200
        before = (disk / CASSETTE).read_bytes()
        _remount(disk, "ro")
        try:
            calls = _upstream_calls(upstream)
            with HealthProbe(child.url) as probe:
                for i in probe.rounds(4):
                    _check_507(client.post("/chat/completions", json=_chat("read-only", i % 2 == 1)), "Read-only")
            probe.check()
            assert _upstream_calls(upstream) == calls
        finally:
            _remount(disk, "rw")
        assert (disk / CASSETTE).read_bytes() == before
        again = client.post("/chat/completions", json=_chat("writable again"))
        assert again.status_code == 200 and again.headers["x-mockserver-source"] == "record"
        figures["read-only disk: /health during 507s"] = probe.figures()


def test_a_write_that_fails_at_the_end_is_an_error_before_the_terminator(tmp_path: Path) -> None:
    """The room reserved up front (256 KB) is there, but the answer (~400 KB) outgrows the disk."""
    with tmpfs(tmp_path / "disk", 1024) as disk, _servers(disk) as (_, child):
        client = httpx.Client(base_url=child.base_url, timeout=120)
        assert client.post("/chat/completions", json=_chat("small first")).status_code == 200
        before = (disk / CASSETTE).read_bytes()
        filler = disk / ".filler"
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        filler.write_bytes(b"\0" * max(0, free - 320 * KB))  # room for the reservation, not the answer
        streamed = client.post("/chat/completions", json=_chat("big", stream=True))
        assert streamed.status_code == 200  # the stream had started: the error comes in-band
        parsed = frames(streamed.content)
        assert parsed, streamed.content[:300]
        assert all(f.data != "[DONE]" for f in parsed), "a [DONE] for a recording that was not kept"
        last = json.loads(parsed[-1].data)
        assert last["error"]["code"] == "cassette_write_failed" and CASSETTE in last["error"]["message"]
        whole = client.post("/chat/completions", json=_chat("big"))
        error = _check_507(whole, "No space left on device")
        assert "upstream answered" in error["message"]
        assert (disk / CASSETTE).read_bytes() == before, "a torn append was left in the cassette"
        filler.unlink()
        assert client.post("/chat/completions", json=_chat("fine again")).status_code == 200
