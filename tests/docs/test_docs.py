"""Every Python snippet in README.md and docs/*.md runs, so the docs cannot rot.

* A block whose first line is ``# file: test_<name>.py`` is a pytest module: it runs with
  pytester, the mockserver plugin active, and must pass.
* Any other block runs as a script against a live server, exactly as printed but for the
  address: the default ``http://127.0.0.1:4010`` in the code is the test server's, and
  ``OPENAI_BASE_URL`` (…/v1) and ``OPENAI_API_KEY`` are set, as the shell of a reader who
  followed docs/docker.md's ``export`` lines would be. Nothing else is: a block that needs a
  variable the docs do not set fails here as it would for a reader.
  Blocks that import LangChain, LiteLLM or an agent framework (pydantic-ai, the OpenAI Agents SDK,
  smolagents, DSPy) run in ``.venv-docs`` (built by the test command: tests/support/venvs.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support import venvs
from tests.support.live import Live, serve_in_thread

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
_EXTRA_MODULES = r"langchain\w*|langgraph|litellm|pydantic_ai|agents|smolagents|dspy"
_EXTRAS = re.compile(rf"^\s*(import|from)\s+({_EXTRA_MODULES})\b", re.MULTILINE)


@dataclass(frozen=True)
class Snippet:
    source: str  # README.md:123
    code: str

    @property
    def test_file(self) -> str | None:
        first = self.code.splitlines()[0] if self.code else ""
        match = re.fullmatch(r"#\s*file:\s*(test_\w+\.py)\s*", first)
        return match.group(1) if match else None

    @property
    def extras(self) -> bool:
        return bool(_EXTRAS.search(self.code))


def snippets() -> list[Snippet]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(Snippet(f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return found


ALL = snippets()
SCRIPTS = [s for s in ALL if s.test_file is None and not s.extras]
EXTRAS = [s for s in ALL if s.test_file is None and s.extras]
TESTS = [s for s in ALL if s.test_file is not None]


@pytest.fixture(scope="module")
def docs_server() -> Iterator[Live]:
    """A server of its own, as a reader would start it (`mockserver serve`, defaults)."""
    with serve_in_thread(create_app(Settings())) as live:
        yield live


def _run(python: Path | str, snippet: Snippet, live: Live, tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MOCKSERVER_")},
        "OPENAI_BASE_URL": live.base_url,
        "OPENAI_API_KEY": "sk-docs",
    }
    # The docs address a server at its default address; this one listens elsewhere.
    code = snippet.code.replace("http://127.0.0.1:4010", live.url).replace("http://localhost:4010", live.url)
    done = subprocess.run([str(python), "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{snippet.source} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    httpx_reset(live)


def httpx_reset(live: Live) -> None:
    """Scripted answers or faults a snippet added must not reach the next one."""
    import httpx

    httpx.post(live.url + "/__mockserver/reset", timeout=10)


def test_there_are_snippets() -> None:
    assert len(SCRIPTS) >= 5 and TESTS and EXTRAS


@pytest.mark.parametrize("snippet", SCRIPTS, ids=[s.source for s in SCRIPTS])
def test_script_snippet_runs(snippet: Snippet, docs_server: Live, tmp_path: Path) -> None:
    _run(sys.executable, snippet, docs_server, tmp_path)


@pytest.mark.docs_extras
@pytest.mark.parametrize("snippet", EXTRAS, ids=[s.source for s in EXTRAS])
def test_third_party_quickstart_runs(snippet: Snippet, docs_server: Live, tmp_path: Path) -> None:
    _run(venvs.DOCS.python_or_skip(), snippet, docs_server, tmp_path)


@pytest.mark.parametrize("snippet", TESTS, ids=[s.source for s in TESTS])
def test_pytest_snippet_passes(snippet: Snippet, pytester: pytest.Pytester) -> None:
    assert snippet.test_file is not None
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")  # as a reader's project would
    pytester.makepyfile(**{snippet.test_file[:-3]: snippet.code})
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    assert result.ret == 0, f"{snippet.source}:\n" + "\n".join(result.outlines[-40:])
