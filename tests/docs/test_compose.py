"""The compose files under docs/ say only what mockserver understands: each parses, every
``MOCKSERVER_*`` variable is a real setting (or ``MOCKSERVER_WORKERS``) with a value it takes, and
a fleet of several workers is given a state they can share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mockserver.cli import COMMAND_FLAGS
from mockserver.config import Settings
from mockserver.state.urls import kind_of

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "docs").glob("docker-compose*.yml"))


def _mockserver_env(path: Path) -> dict[str, str]:
    spec: dict[str, Any] = yaml.safe_load(path.read_text())
    env: dict[str, str] = spec["services"]["mockserver"]["environment"]
    return {key: str(value) for key, value in env.items() if key.startswith("MOCKSERVER_")}


def test_there_are_compose_files() -> None:
    assert {p.name for p in FILES} >= {"docker-compose.yml", "docker-compose.scaling.yml"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_variable_is_a_setting_with_a_value_it_takes(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _mockserver_env(path)
    names = {key.removeprefix("MOCKSERVER_").lower() for key in env}
    assert names <= set(Settings.model_fields) | set(COMMAND_FLAGS), names
    workers = int(env.pop("MOCKSERVER_WORKERS", "1"))
    for key, value in env.items():  # read as the container reads them: from its environment
        monkeypatch.setenv(key, value)
    settings = Settings()  # a bad value raises, naming the field
    if workers > 1:
        assert kind_of(settings.state) != "memory", "several workers need a shared state"


def test_the_scaling_fleet_shares_a_persistent_redis() -> None:
    spec: dict[str, Any] = yaml.safe_load((ROOT / "docs" / "docker-compose.scaling.yml").read_text())
    redis = spec["services"]["redis"]
    assert "--appendonly" in redis["command"] and "always" in redis["command"]
    state = spec["services"]["mockserver"]["environment"]["MOCKSERVER_STATE"]
    assert state.startswith("redis://redis:")
