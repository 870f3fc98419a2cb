"""The Node snippets in README.md and docs/*.md run, as the files they say they are.

A Node block (```js) starts with ``// file: NAME.mjs``: the file a reader saves it as. The
extension is part of what is tested — ``import`` and top-level ``await`` need an ES module,
and a plain ``.js`` file is CommonJS unless a ``package.json`` says ``"type": "module"``
(``Cannot use import statement outside a module``). Each block is saved under its name and run
with ``node`` against a live server, as the Python snippets are (tests/docs/test_docs.py), with
ES-module detection turned off where ``node`` has it, so an older Node's behaviour is what is
checked. The ``openai`` npm package comes from ``.node-docs/`` (tests/support/node.py); without
it, or without ``node``, the run skips and says so; the file-name check never skips.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support import node
from tests.support.live import Live, serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"^```(?:js|javascript|mjs)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_FILE = re.compile(r"//\s*file:\s*(\S+)\s*")


@dataclass(frozen=True)
class Snippet:
    source: str  # README.md:57
    code: str

    @property
    def file(self) -> str | None:
        """The file name the block's first line gives (``// file: quickstart.mjs``)."""
        first = self.code.splitlines()[0] if self.code else ""
        match = _FILE.fullmatch(first)
        return match.group(1) if match else None


def snippets() -> list[Snippet]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(Snippet(f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return found


def _cases() -> list[object]:
    return [pytest.param(s, id=s.source) for s in SNIPPETS]


SNIPPETS = snippets()


def test_there_are_node_snippets() -> None:
    assert SNIPPETS


@pytest.mark.parametrize("snippet", _cases())
def test_a_node_snippet_names_the_es_module_file_it_is(snippet: Snippet) -> None:
    assert snippet.file is not None, f"{snippet.source}: a Node block starts with `// file: NAME.mjs`"
    assert snippet.file.endswith(".mjs"), f"{snippet.source}: {snippet.file} is not an ES module file (.mjs)"


@pytest.fixture(scope="module")
def node_server() -> Iterator[Live]:
    """A server of its own, as a reader would start it (`mockserver serve`, defaults)."""
    with serve_in_thread(create_app(Settings())) as live:
        yield live


@functools.cache
def _no_detection(binary: str) -> tuple[str, ...]:
    """The flag that makes ``node`` treat a ``.js`` file as CommonJS, as Node before 20.19 and
    22.7 always did (those guess ES modules from the syntax), where this ``node`` has it."""
    flag = "--no-experimental-detect-module"
    done = subprocess.run([binary, flag, "-e", "0"], capture_output=True, timeout=60)
    return (flag,) if done.returncode == 0 else ()


@pytest.mark.parametrize("snippet", _cases())
def test_a_node_snippet_runs_as_the_file_it_names(snippet: Snippet, node_server: Live, tmp_path: Path) -> None:
    binary, modules = node.modules_or_skip()
    name = snippet.file or "quickstart.js"  # a block naming no file is what a reader saves as .js
    script = tmp_path / name
    # The docs address a server at its default address; this one listens elsewhere.
    code = snippet.code.replace("http://127.0.0.1:4010", node_server.url).replace(
        "http://localhost:4010", node_server.url
    )
    script.write_text(code)
    (tmp_path / "node_modules").symlink_to(modules, target_is_directory=True)  # how `import "openai"` resolves
    env = {
        **os.environ,
        "OPENAI_BASE_URL": node_server.base_url,
        "OPENAI_API_KEY": "sk-docs",
        "MOCKSERVER_URL": node_server.url,
    }
    done = subprocess.run(
        [binary, *_no_detection(binary), name], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{snippet.source} as {name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{snippet.source} printed nothing"
