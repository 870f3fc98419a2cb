"""The docs' third-party quickstarts (LangChain, LiteLLM) need packages that pin the
``openai`` SDK below 3, so they cannot share the project's virtualenv: they get their own,
``.venv-docs/``, built once per machine (a stamp records what it holds) and started in the
background when the suite is collected, so the install overlaps the other tests.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-docs"
PACKAGES = ("langchain-openai>=0.3", "litellm>=1.60")
_STAMP = VENV / ".installed"
_lock = threading.Lock()
_thread: threading.Thread | None = None
_error: list[str] = []


def _wanted() -> str:
    return hashlib.sha256("\n".join(PACKAGES).encode()).hexdigest()


def python() -> Path:
    return VENV / "bin" / "python"


def ready() -> bool:
    return _STAMP.is_file() and _STAMP.read_text() == _wanted() and python().is_file()


def _build() -> None:
    try:
        if not python().is_file():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, capture_output=True)
        pip = [str(python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PACKAGES]
        done = subprocess.run(pip, capture_output=True, text=True, timeout=1200)
        if done.returncode != 0:
            _error.append(done.stdout[-3000:] + done.stderr[-3000:])
            return
        _STAMP.write_text(_wanted())
    except (OSError, subprocess.SubprocessError) as exc:
        _error.append(repr(exc))


def start() -> None:
    """Begin building the virtualenv in the background (no-op when it is ready or building)."""
    global _thread
    with _lock:
        if ready() or _thread is not None:
            return
        _thread = threading.Thread(target=_build, name="docs-extras", daemon=True)
        _thread.start()


def wait(timeout: float = 1200) -> Path:
    """The extras' python, once built (AssertionError with pip's output if it failed)."""
    start()
    if _thread is not None:
        _thread.join(timeout)
    assert ready(), "the docs-extras virtualenv could not be built:\n" + "\n".join(_error)
    return python()
