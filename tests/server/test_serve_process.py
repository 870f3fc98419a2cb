"""``mockserver serve`` as a process, as a supervisor runs it: SIGTERM is a graceful stop that
exits 0 (not 143, which make reports as ``*** Terminated``); a port in use, and a cassette
directory that does not exist, are one line each naming the flag, not a log line or a server
that starts and misses every request."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from tests.support.live import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[2]


def _start(args: Sequence[str], cwd: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    command = [sys.executable, "-m", "mockserver", "serve", "--port", str(port), "--backend", "script", *args]
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
    except RuntimeError:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        raise AssertionError(f"mockserver did not start: {out}{err}") from None
    return proc, url


def _terminate(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate(timeout=10)
        raise
    return proc.returncode, err


def _once(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A start that must fail on its own, quickly."""
    command = [sys.executable, "-m", "mockserver", "serve", "--backend", "script", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_sigterm_is_a_graceful_stop_that_exits_0(tmp_path: Path) -> None:
    proc, url = _start([], tmp_path)
    assert httpx.get(url + "/v1/models", timeout=10).status_code == 200
    code, err = _terminate(proc)
    assert code == 0, err
    assert "Traceback" not in err


@pytest.mark.slow
def test_sigterm_stops_workers_with_exit_0(tmp_path: Path) -> None:
    proc, url = _start(["--workers", "2", "--state", f"sqlite:{tmp_path / 'state.db'}"], tmp_path)
    assert httpx.get(url + "/v1/models", timeout=10).status_code == 200
    code, err = _terminate(proc)
    assert code == 0, err


def test_a_port_in_use_is_one_line_naming_the_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _once(["--port", str(port)], tmp_path)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"--port {port}" in lines[0] and "in use" in lines[0] and "Errno" not in lines[0], lines


def test_a_port_in_use_by_workers_is_the_same_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _once(["--port", str(port), "--workers", "2", "--state", f"sqlite:{tmp_path / 's.db'}"], tmp_path)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--port {port}" in lines[0], done.stderr


def test_a_missing_cassette_directory_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    done = _once(["--port", "0", "--cassettes", str(missing)], tmp_path)
    assert done.returncode == 2  # as `mockserver cassettes check` on the same path
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mockserver: invalid --cassettes:"), done.stderr
    assert str(missing) in lines[0] and not missing.exists()
    check = subprocess.run(
        [sys.executable, "-m", "mockserver", "cassettes", "check", str(missing)], capture_output=True, timeout=60
    )
    assert check.returncode == 2


def test_a_missing_cassette_directory_is_created_when_the_record_mode_records(tmp_path: Path) -> None:
    missing = tmp_path / "new" / "cassettes"
    proc, _ = _start(
        ["--cassettes", str(missing), "--record-mode", "once", "--upstream", "http://127.0.0.1:9"], tmp_path
    )
    try:
        assert missing.is_dir()
    finally:
        code, err = _terminate(proc)
    assert code == 0, err
