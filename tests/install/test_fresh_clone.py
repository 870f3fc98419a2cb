"""A clone with nothing beside it: the spec-validated tests pass in a fresh clone of the
repository in an empty folder (no ``../shared/spec/``), against the wire facts it carries
(tests/support/openai-wire.json, made by tests/support/make_wire_spec.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.venvs import ROOT

# Tests that validate answers against OpenAI's schemas, a few seconds' worth.
SPEC_TESTS = (
    "tests/contract/test_wire_spec.py",
    "tests/contract/test_spec_validation.py",
    "tests/server/test_errors.py",
)


def test_a_clone_in_an_empty_folder_validates_against_its_own_spec(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True, timeout=300)
    assert not (tmp_path / "shared").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["clone"]
    env = {k: v for k, v in os.environ.items() if k != "MOCKSERVER_OPENAPI_SPEC"}
    env["PYTHONPATH"] = str(clone)  # the clone's package and tests, not this checkout's
    where = subprocess.run(
        [sys.executable, "-c", "import mockserver, tests.support.spec as s; print(mockserver.__file__, s.__file__)"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert all(path.startswith(str(clone)) for path in where.stdout.split()), where.stdout
    # Without the installed plugins these tests do not use: hypothesis's, faker's and schemathesis's
    # import in seconds, at every start of pytest.
    unused = ["-p", "no:hypothesispytest", "-p", "no:faker", "-p", "no:schemathesis"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *unused, *SPEC_TESTS],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1], done.stdout[-1000:]
