"""Torch is an extra: the plain package resolves without it, and in a virtualenv without it
(``.venv-light``, built by the test command) the server, scripted answers and the pytest plugin
work, while what needs the model says which extra brings it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live import free_port, stop, wait_healthy
from tests.support.venvs import LIGHT, ROOT

EXTRA = "pip install 'mockserver[model]'"
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "What is the answer?"}]}


def test_the_plain_package_resolves_without_torch(tmp_path: Path) -> None:
    """What ``pip install mockserver`` would install (a dry run against the configured indexes)."""
    report = tmp_path / "report.json"
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed", "--no-cache-dir"]
    subprocess.run([*pip, "--report", str(report), str(ROOT)], check=True, timeout=600, capture_output=True)
    names = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert "mockserver" in names and "starlette" in names
    assert not {n for n in names if n == "torch" or n.startswith(("nvidia-", "triton"))}, sorted(names)
    model = tmp_path / "model.json"
    subprocess.run(
        [*pip, "--report", str(model), "--no-deps", f"{ROOT}[model]"], check=True, timeout=600, capture_output=True
    )
    # The extra itself names torch (its dependencies are what --no-deps leaves out).
    requires = json.loads(model.read_text())["install"][0]["metadata"]["requires_dist"]
    assert any(r.startswith("torch==2.13.0") and 'extra == "model"' in r for r in requires), requires


@pytest.fixture(scope="module")
def light() -> Path:
    python = LIGHT.python_or_skip()
    found = subprocess.run([str(python), "-c", "import torch"], capture_output=True)
    assert found.returncode != 0, ".venv-light must not hold torch"
    return python


def test_the_app_imports_without_torch(light: Path) -> None:
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


def test_a_scripted_answer_needs_no_torch(server: tuple[str, Path]) -> None:
    url, log = server
    answer = httpx.post(url + "/v1/chat/completions", json=CHAT)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "Forty-two."
    assert answer.headers["x-mockserver-source"] == "script"
    banner = log.read_text()
    assert "backend    script," in banner and EXTRA in banner


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {**CHAT, "logprobs": True}),  # a scripted answer's logprobs: the model scores it
        ("/v1/embeddings", {"model": "text-embedding-3-small", "input": "hi"}),
    ],
    ids=["logprobs", "embeddings"],
)
def test_what_needs_the_model_names_the_extra(server: tuple[str, Path], path: str, body: dict[str, object]) -> None:
    answer = httpx.post(server[0] + path, json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "model_not_installed" and EXTRA in error["message"]


def test_a_request_no_rule_answers_names_the_extra(server: tuple[str, Path]) -> None:
    unmatched = {**CHAT, "messages": [{"role": "user", "content": "x"}]}
    answer = httpx.post(server[0] + "/v1/chat/completions", json=unmatched)
    assert answer.status_code == 404 and EXTRA in answer.json()["error"]["message"]
    assert httpx.get(server[0] + "/health").status_code == 200


def test_asking_for_the_model_without_it_is_one_line(light: Path) -> None:
    done = subprocess.run(
        [str(light.parent / "mockserver"), "serve", "--backend", "script,reference"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and EXTRA in lines[0] and "--backend" in lines[0], done.stderr


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
