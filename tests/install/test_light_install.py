"""The plain install serves the reference model, without torch: the package resolves without it,
and in a virtualenv that has none (``.venv-light``: the package with its ``pytest`` extra, built by
the test command) the server answers with the model's real logprobs (NumPy reads the weights, the
project's kernels compute them), scripted answers and the pytest plugin work, and torch stays
where it belongs (the ``train`` and ``test`` extras)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement

from mockserver.backends import MODEL_EXTRA
from tests.support.live import free_port, stop, wait_healthy
from tests.support.venvs import LIGHT, ROOT

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "What is the answer?"}]}


def _build_requirements_met() -> bool:
    """Whether this Python holds what pyproject.toml's ``build-system.requires`` asks for."""
    for wanted in tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]:
        requirement = Requirement(wanted)
        try:
            installed = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            return False
        if not requirement.specifier.contains(installed, prereleases=True):
            return False
    return True


def test_the_plain_package_resolves_without_torch(tmp_path: Path) -> None:
    """What ``pip install mockserver`` would install (a dry run against the configured indexes)."""
    report = tmp_path / "report.json"
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed", "--no-cache-dir"]
    if _build_requirements_met():
        # The package's metadata from the build backend installed here: an isolated build would
        # fetch and install the same one first (seconds), and it names the same requirements.
        pip.append("--no-build-isolation")
    subprocess.run([*pip, "--report", str(report), str(ROOT)], check=True, timeout=600, capture_output=True)
    names = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert {"mockserver", "starlette", "numpy", "safetensors"} <= names  # the model's readers are in
    assert not {n for n in names if n == "torch" or n.startswith(("nvidia-", "triton"))}, sorted(names)
    # torch is named by the extras that train the model and test it against its definition only.
    metadata = json.loads(report.read_text())["install"]
    requires = next(i["metadata"]["requires_dist"] for i in metadata if i["metadata"]["name"] == "mockserver")
    torch = sorted(r.split(";")[1].strip() for r in requires if r.startswith("torch"))
    assert torch == ['extra == "test"', 'extra == "train"'], requires
    assert not any("model" in r.split(";")[-1] for r in requires), requires  # no `model` extra any more


@pytest.fixture(scope="module")
def light() -> Path:
    python = LIGHT.python_or_skip()
    found = subprocess.run([str(python), "-c", "import torch"], capture_output=True)
    assert found.returncode != 0, ".venv-light must not hold torch"
    return python


def test_the_app_imports_without_torch(light: Path) -> None:  # (it could not: there is none)
    code = "import sys, mockserver.app, mockserver.testing.plugin; assert 'torch' not in sys.modules; print('ok')"
    done = subprocess.run([str(light), "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.strip() == "ok", done.stderr


@pytest.fixture(scope="module")
def server(light: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("light")
    rules = folder / "rules.yaml"
    rules.write_text("- match: answer\n  text: Forty-two.\n")
    log = folder / "server.log"
    port = free_port()
    command = [str(light.parent / "mockserver"), "serve", "--port", str(port), "--rules", str(rules)]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=folder, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url, log
    finally:
        stop(proc)


def test_a_scripted_answer_plays(server: tuple[str, Path]) -> None:
    url, log = server
    answer = httpx.post(url + "/v1/chat/completions", json=CHAT)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "Forty-two."
    assert answer.headers["x-mockserver-source"] == "script"
    banner = log.read_text()
    assert "backend    script,reference," in banner and "not installed" not in banner


def test_the_model_answers_with_real_logprobs(server: tuple[str, Path]) -> None:
    """The plain install's point: a chat no rule scripts, answered by the reference model with its
    logprobs (self-consistent: the sampled token's logprob among the top ones, best first)."""
    asked = {**CHAT, "messages": [{"role": "user", "content": "Tell me about Paris."}], "max_tokens": 16, "seed": 3}
    answer = httpx.post(server[0] + "/v1/chat/completions", json={**asked, "logprobs": True, "top_logprobs": 4})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-mockserver-source"] == "reference"
    choice = answer.json()["choices"][0]
    content = choice["logprobs"]["content"]
    assert content and "".join(t["token"] for t in content) == choice["message"]["content"]
    for entry in content:
        tops = entry["top_logprobs"]
        assert len(tops) == 4 and [t["logprob"] for t in tops] == sorted((t["logprob"] for t in tops), reverse=True)
        among = entry["token"] in {t["token"] for t in tops}
        assert entry["logprob"] <= 0 and (among or entry["logprob"] <= tops[-1]["logprob"])
    again = httpx.post(server[0] + "/v1/chat/completions", json={**asked, "logprobs": True, "top_logprobs": 4})
    assert again.json()["choices"] == answer.json()["choices"]  # the same request, the same bytes


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {**CHAT, "logprobs": True}),  # a scripted answer's logprobs: the model scores it
        ("/v1/embeddings", {"model": "text-embedding-3-small", "input": "hi"}),
    ],
    ids=["scripted-logprobs", "embeddings"],
)
def test_what_needs_the_model_gets_it(server: tuple[str, Path], path: str, body: dict[str, object]) -> None:
    answer = httpx.post(server[0] + path, json=body)
    assert answer.status_code == 200, answer.text


def test_without_numpy_or_safetensors_asking_for_the_model_is_one_line(light: Path) -> None:
    """Only a broken install lacks the model (its readers are dependencies): then the server
    says in one line what to install."""
    code = "import sys; sys.modules['safetensors'] = None; from mockserver.cli import main; sys.exit(main())"
    done = subprocess.run(
        [str(light), "-c", code, "serve", "--backend", "script,reference"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and MODEL_EXTRA in lines[0] and "--backend" in lines[0], done.stderr


def test_the_plugin_works_without_torch(light: Path, tmp_path: Path) -> None:
    """The documented install for tests (``mockserver[pytest]``): fixtures, scripted answers."""
    (tmp_path / "test_scripted.py").write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.mark.mockserver(rules=[{"match": "capital", "text": "Paris."}])
            def test_capital(openai_client):
                answer = openai_client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "The capital of France?"}]
                )
                assert answer.choices[0].message.content == "Paris."
            """
        )
    )
    done = subprocess.run(
        [str(light), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
