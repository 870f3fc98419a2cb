"""Another commit of this repository, checked out beside it, to measure against in the same run.

``checkout(rev)`` makes a temporary ``git worktree`` of ``rev`` and removes it afterwards. A
server started there (``procs.running(..., root=path)``) imports that commit's ``mockserver``
(its folder comes first on ``PYTHONPATH``) with this virtualenv's packages, so both are
measured on the same machine, in the same minutes, under the same load.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.procs import ROOT

__all__ = ["checkout", "describe"]


def describe(rev: str) -> str | None:
    """``rev`` as a short commit id and subject, or None when this clone does not have it."""
    done = subprocess.run(
        ["git", "log", "-1", "--format=%h %s", rev], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


@contextmanager
def checkout(rev: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as parent:
        path = Path(parent) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(path), rev], cwd=ROOT, check=True)
        if (path / "setup.py").is_file():  # its C kernel, as an install would build it
            subprocess.run(
                [sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"],
                cwd=path,
                check=False,
                capture_output=True,
            )
        try:
            yield path
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)
