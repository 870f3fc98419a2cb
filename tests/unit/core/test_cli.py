"""The command line: flags derived from Settings, precedence flag > env > default, help that
reads well, serving (and saying where)."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from typing import IO

import httpx
import pytest

from mockserver.cli import COMMAND_FLAGS, GROUPS, banner, build_parser, main, settings_from_args
from mockserver.config import Settings
from tests.support.live import ROOT, serve_in_process, stop


def _serve_args(*argv: str) -> Settings:
    return settings_from_args(build_parser().parse_args(["serve", *argv]))


def test_every_setting_is_a_flag() -> None:
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr,index]
    flags = {opt for action in serve._actions for opt in action.option_strings}
    for name, field in Settings.model_fields.items():
        secret = "environment only" in (field.description or "")
        assert ("--" + name.replace("_", "-") in flags) != secret, name  # secrets never on argv


def test_the_upstream_key_comes_from_the_environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOCKSERVER_UPSTREAM_API_KEY", "sk-from-env")
    key = Settings().upstream_api_key
    assert key is not None and key.get_secret_value() == "sk-from-env"
    assert "sk-from-env" not in repr(Settings())  # a SecretStr never prints itself
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--upstream-api-key", "sk-x"])


@pytest.mark.parametrize(
    ("env", "argv", "expected"),
    [
        pytest.param({}, [], 0, id="default"),
        pytest.param({"MOCKSERVER_SEED": "7"}, [], 7, id="env"),
        pytest.param({"MOCKSERVER_SEED": "7"}, ["--seed", "9"], 9, id="flag-beats-env"),
    ],
)
def test_precedence(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], argv: list[str], expected: int) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert _serve_args(*argv).seed == expected


def test_lists_and_booleans() -> None:
    settings = _serve_args("--models", "a, b@100", "--api-keys", "k1,k2", "--reject-unknown-models")
    assert settings.model_windows() == {"a": 8192, "b": 100}
    assert settings.api_keys == ["k1", "k2"]
    assert settings.reject_unknown_models is True


def test_bad_flag_value_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--port", "not-a-port"]) == 2
    assert "--port" in capsys.readouterr().err


def test_serve_lists_the_configured_models() -> None:
    with serve_in_process(["--models", "alpha,beta@512"]) as live:
        ids = [m["id"] for m in httpx.get(live.base_url + "/models").json()["data"]]
        assert ids == ["alpha", "beta"]
        body = {"model": "beta", "prompt": "hi", "max_tokens": 600}
        response = httpx.post(live.base_url + "/completions", json=body)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "context_length_exceeded"


def test_help_introduces_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "test double" in out
    for command in ("serve", "cassettes"):
        assert f"\n    {command} " in out, command  # listed with its one-line summary
    assert "examples:" in out and "mockserver serve --port 0" in out


def test_serve_help_groups_the_flags_by_topic(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    titles = [f"{title}:" for title in GROUPS]
    assert all(title in out for title in titles)
    assert out.index("--cassettes ") > out.index("cassettes (record and replay):") > out.index("--profile ")


def test_flag_groups_name_real_settings() -> None:
    grouped = [name for names in GROUPS.values() for name in names]
    assert len(grouped) == len(set(grouped))
    assert set(grouped) <= set(Settings.model_fields) | set(COMMAND_FLAGS)  # --workers is the command's own


def test_the_banner_names_every_notable_mode() -> None:
    settings = Settings(
        cassettes="cassettes",
        record_mode="new_episodes",
        upstream="https://api.openai.com",
        faults="http.503@p=0.1",
        store="sqlite:/tmp/responses.db",
        seed=7,
    )
    text = banner(settings, "127.0.0.1", 4321)
    assert text.startswith("mockserver ") and "http://127.0.0.1:4321/v1" in text
    for part in ("seed 7", "profile openai", "record mode new_episodes", "http.503@p=0.1", "sqlite:/tmp/responses.db"):
        assert part in text, part
    assert "faults" not in banner(Settings(), "127.0.0.1", 4010)  # quiet about what is off


def test_serve_on_port_0_says_where_it_listens() -> None:
    command = [sys.executable, "-m", "mockserver", "serve", "--port", "0", "--profile", "fireworks"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stderr is not None

    def pump(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=pump, args=(proc.stderr,), daemon=True).start()
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while not any("backend" in line for line in seen):
            try:
                seen.append(lines.get(timeout=max(deadline - time.monotonic(), 0.01)))
            except queue.Empty:
                pytest.fail(f"no banner within 60 s; stderr so far: {seen}")
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", "".join(seen))
        assert found is not None, seen
        port = int(found.group(1))
        assert port != 0
        assert "profile fireworks" in "".join(seen)
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
    finally:
        stop(proc)
