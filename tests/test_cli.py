"""The command line: flags derived from Settings, precedence flag > env > default, serving."""

from __future__ import annotations

import httpx
import pytest

from mockserver.cli import build_parser, main, settings_from_args
from mockserver.config import Settings
from tests.live import serve_in_process


def _serve_args(*argv: str) -> Settings:
    return settings_from_args(build_parser().parse_args(["serve", *argv]))


def test_every_setting_is_a_flag() -> None:
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
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
