"""Torch stays off the import path of everything that does not run the model."""

from __future__ import annotations

import subprocess
import sys

from tests.support.live import ROOT


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_import_mockserver_is_light() -> None:
    loaded = _modules_after("import mockserver")
    assert "torch" not in loaded and "starlette" not in loaded and "pydantic" not in loaded


def test_building_the_app_does_not_import_torch() -> None:
    loaded = _modules_after("from mockserver import create_app, Settings\ncreate_app(Settings())")
    assert "starlette" in loaded
    assert "torch" not in loaded


def test_public_names() -> None:
    import mockserver

    assert sorted(mockserver.__all__) == ["Settings", "__version__", "create_app"]
    for name in mockserver.__all__:
        assert getattr(mockserver, name) is not None
