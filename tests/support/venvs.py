"""The virtualenvs beside the project's own, built by the test command before pytest runs.

* ``.venv-docs/``: the docs' third-party quickstarts (LangChain, LiteLLM) and the agent
  frameworks the contract tests drive (pydantic-ai, LangChain ``create_agent`` on LangGraph,
  the OpenAI Agents SDK, smolagents, DSPy). They pin ``openai`` and its dependencies their
  own way, so they cannot share ``.venv``.
* ``.venv-instructor/``: instructor, which caps ``jiter`` below 0.15 (so an older ``openai``)
  and ``rich`` below 15 (smolagents takes 15): it cannot live beside the others.
* ``.venv-prompted/``: AutoGen AgentChat, LlamaIndex and CrewAI, whose prompts carry the
  protocol (a stop word, ReAct text); CrewAI's pins (and its size) keep it apart from the others.
* ``.venv-light/``: mockserver as ``pip install 'mockserver[pytest]'`` installs it, without
  torch: the proof that scripted answers, cassettes, faults and the plugin need no model.

``make test`` runs ``python -m tests.support.venvs`` (all built at once, each skipped when its
stamp says it is up to date, each saying what it installs when it does), then pytest.
Collecting or running the tests never installs anything: a test that needs a virtualenv that is
not there skips, naming the command that builds it (:meth:`Venv.python_or_skip`).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = "make test (or: .venv/bin/python -m tests.support.venvs)"


@dataclass(frozen=True)
class Venv:
    name: str
    folder: Path
    packages: tuple[str, ...]  # pip install arguments
    inputs: tuple[Path, ...] = ()  # files whose content, when it changes, means a rebuild
    about: str = ""  # what it holds and about its size, said when it is built

    @property
    def python(self) -> Path:
        return self.folder / "bin" / "python"

    @property
    def stamp(self) -> Path:
        return self.folder / ".installed"

    def wanted(self) -> str:
        digest = hashlib.sha256("\n".join(self.packages).encode())
        for path in self.inputs:
            digest.update(path.read_bytes())
        return digest.hexdigest()

    def ready(self) -> bool:
        return self.stamp.is_file() and self.stamp.read_text() == self.wanted() and self.python.is_file()

    def python_or_skip(self) -> Path:
        """Its python, or a skip of the calling test naming how to build it."""
        if not self.ready():
            import pytest

            pytest.skip(f"the {self.name} virtualenv ({self.folder.name}/) is not built: {BUILD}")
        return self.python

    def build(self) -> str | None:
        """Build (or bring up to date) the virtualenv; None, or what went wrong."""
        if self.ready():
            return None
        try:
            if not self.python.is_file():
                subprocess.run([sys.executable, "-m", "venv", str(self.folder)], check=True, capture_output=True)
                (self.folder / ".gitignore").write_text("*\n")  # as Python 3.13's venv writes it
            pip = [str(self.python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
            done = subprocess.run([*pip, *self.packages], capture_output=True, text=True, timeout=1800, cwd=ROOT)
        except (OSError, subprocess.SubprocessError) as exc:
            return repr(exc)
        if done.returncode != 0:
            return done.stdout[-3000:] + done.stderr[-3000:]
        self.stamp.write_text(self.wanted())
        return None


DOCS = Venv(
    "docs-extras",
    ROOT / ".venv-docs",
    (
        "langchain-openai>=0.3",
        "langchain-anthropic>=1.0",  # ChatAnthropic on the Messages wire (tests/contract/test_anthropic_frameworks.py)
        "langchain-google-genai>=2",  # ChatGoogleGenerativeAI (tests/contract/test_gemini_frameworks.py)
        "litellm>=1.60",
        "langchain>=1.0",
        "langgraph>=1.0",
        "pydantic-ai-slim[openai,anthropic,google]>=1.0",
        "openai-agents>=0.3",
        "smolagents[openai]>=1.20",
        "dspy>=3.0",
    ),
    about="LangChain, LiteLLM and the agent frameworks, ~550 MB",
)
INSTRUCTOR = Venv("instructor", ROOT / ".venv-instructor", ("instructor>=1.10",), about="instructor, ~100 MB")
# The frameworks whose prompt carries the protocol (tests/contract/test_agents_prompted.py): a stop
# word, ReAct text. Pinned: their prompts are what the tests read, and they pin openai below 3.
PROMPTED = Venv(
    "prompted-agents",
    ROOT / ".venv-prompted",
    (
        "autogen-agentchat==0.7.5",
        "autogen-ext[openai]==0.7.5",
        "llama-index-core==0.14.25",
        "llama-index-llms-openai==0.8.3",
        "crewai==1.15.30",
    ),
    about="AutoGen AgentChat, LlamaIndex, CrewAI, ~1.1 GB",
)
# Editable: the light install runs this checkout's code, as the main one does.
LIGHT = Venv(
    "torch-free",
    ROOT / ".venv-light",
    ("-e", f"{ROOT}[pytest]"),
    (ROOT / "pyproject.toml",),
    about="mockserver[pytest] without torch, ~180 MB",
)
ALL = (DOCS, INSTRUCTOR, PROMPTED, LIGHT)


def main() -> int:
    """Build every virtualenv at once (pip spends most of its time waiting on downloads)."""
    failures: dict[str, str] = {}

    def build(venv: Venv) -> None:
        started = time.monotonic()
        problem = venv.build()
        if problem is not None:
            failures[venv.name] = problem
        else:
            print(f"tests.support.venvs: {venv.folder.name}/ built ({time.monotonic() - started:.0f} s)", flush=True)

    wanted = [venv for venv in ALL if not venv.ready()]
    for venv in wanted:  # said before the downloads start: a first build takes a minute or more
        print(f"tests.support.venvs: building {venv.folder.name}/ ({venv.about}) with pip", flush=True)
    threads = [threading.Thread(target=build, args=(venv,), name=venv.name) for venv in wanted]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, problem in failures.items():
        print(f"tests.support.venvs: the {name} virtualenv could not be built:\n{problem}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
