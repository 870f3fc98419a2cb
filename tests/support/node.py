"""The Node folder beside the project's virtualenvs: the ``openai`` npm package the docs' Node
quickstart imports, built by the test command like ``.venv-docs`` (see :mod:`tests.support.venvs`).

``python -m tests.support.node`` installs it into ``.node-docs/`` (skipped when its stamp says
it is up to date, and when there is no ``npm``). Collecting or running the tests never
installs anything: a test that needs it skips, naming the command (:func:`modules_or_skip`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / ".node-docs"
PACKAGES = ("openai@^5",)  # what the quickstart imports (`import OpenAI from "openai"`)
BUILD = "python -m tests.support.node (needs node and npm)"
_STAMP = FOLDER / ".installed"


def node() -> str | None:
    """The ``node`` on PATH, if any."""
    return shutil.which("node")


def ready() -> bool:
    return _STAMP.is_file() and _STAMP.read_text() == "\n".join(PACKAGES) and (FOLDER / "node_modules").is_dir()


def modules_or_skip() -> tuple[str, Path]:
    """``node`` and the ``node_modules`` folder the quickstart resolves ``openai`` from, or a
    skip of the calling test naming what is missing."""
    import pytest

    found = node()
    if found is None:
        pytest.skip("node is not installed: the Node quickstart cannot run")
    if not ready():
        pytest.skip(f"the openai npm package ({FOLDER.name}/) is not installed: {BUILD}")
    return found, FOLDER / "node_modules"


def build() -> str | None:
    """Install (or bring up to date) the npm packages; None, or what went wrong."""
    if ready():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed"
    print(f"tests.support.node: installing {' '.join(PACKAGES)} into {FOLDER.name}/ with npm (~12 MB)", flush=True)
    FOLDER.mkdir(exist_ok=True)
    (FOLDER / ".gitignore").write_text("*\n")  # never committed, whatever the project's .gitignore says
    command = [npm, "install", "--prefix", str(FOLDER), "--no-audit", "--no-fund", "--silent", *PACKAGES]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)
    except (OSError, subprocess.SubprocessError) as exc:
        return repr(exc)
    if done.returncode != 0:
        return done.stdout[-3000:] + done.stderr[-3000:]
    _STAMP.write_text("\n".join(PACKAGES))
    return None


def main() -> int:
    problem = build()
    if problem is not None:
        print(f"tests.support.node: {FOLDER.name}/ could not be built:\n{problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
