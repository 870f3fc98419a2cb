"""The C kernel is built as the package installs, and is optional: where no C compiler runs,
the package installs anyway and the NumPy kernel answers (the same bytes, tests/golden)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.venvs import ROOT

KERNELS = Path("mockserver/gpt/kernels")


def _tree(tmp_path: Path) -> Path:
    """The build's inputs alone: setup.py, pyproject.toml and the kernel's sources."""
    tree = tmp_path / "tree"
    (tree / KERNELS).mkdir(parents=True)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    for source in (ROOT / KERNELS).glob("native*.[ch]"):
        shutil.copy(source, tree / KERNELS / source.name)
    return tree


def _build(tree: Path, compiler: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CC": compiler}
    return subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler here")
def test_the_build_makes_the_kernel_with_its_flags(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    done = _build(tree, shutil.which("cc") or "cc")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "-ffp-contract=off" in done.stdout + done.stderr  # a product is rounded before its sum
    assert "-ffast-math" not in done.stdout + done.stderr
    built = list((tree / KERNELS).glob("_native*"))
    assert len(built) == 1


def test_without_a_compiler_the_package_still_builds(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    done = _build(tree, "false")  # a "compiler" that always fails
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list((tree / KERNELS).glob("_native*"))
    assert "mockserver.gpt.kernels._native" in done.stdout + done.stderr  # says which extension it left out
