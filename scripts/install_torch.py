"""Install torch's CPU build into this Python's environment, on any machine.

    python scripts/install_torch.py 2.13.0

From PyPI, ``pip install torch==2.13.0`` on Linux resolves to the CUDA build, which pulls
triton and about 17 ``nvidia-*`` packages (gigabytes, for a test double that runs a tiny model
on the CPU). PyTorch publishes CPU wheels on its own index. So: ask pip what
``torch==VERSION`` would bring from the machine's configured indexes (a dry run, metadata only);
if that is the CPU build — a mirror or local wheel directory that carries it, macOS, Windows —
install exactly that, and the machine's configuration is respected; if it brings CUDA packages,
install from PyTorch's CPU index instead. Already installed as a CPU build: nothing to do.

The one-line equivalent by hand:
``pip install torch==VERSION --index-url https://download.pytorch.org/whl/cpu``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
_CUDA = ("nvidia-", "triton")  # what only the CUDA build depends on


def _public(version: str) -> str:
    return version.split("+", 1)[0]


def _cuda(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.lower().startswith(_CUDA))


def installed_cpu(version: str) -> bool:
    """Is torch ``version`` installed here without CUDA packages beside it?"""
    try:
        found = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return False
    names = [d.metadata["Name"] or "" for d in importlib.metadata.distributions()]
    return _public(found) == version and not _cuda(names)


def resolved(version: str) -> list[str]:
    """The packages ``pip install torch==version`` would install from the configured indexes."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed"]
        subprocess.run([*pip, "--report", str(report), f"torch=={version}"], check=True)
        plan = json.loads(report.read_text())
    return [str(item["metadata"]["name"]) for item in plan.get("install", [])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="the torch version, e.g. 2.13.0")
    args = parser.parse_args(argv)
    version: str = args.version
    if installed_cpu(version):
        return 0
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    cuda = _cuda(resolved(version))
    if cuda:
        print(
            f"torch=={version} from the configured indexes is the CUDA build ({', '.join(cuda[:3])}…); "
            f"installing the CPU build from {CPU_INDEX}",
            file=sys.stderr,
        )
        done = subprocess.run([*pip, f"torch=={version}", "--index-url", CPU_INDEX])
    else:
        done = subprocess.run([*pip, f"torch=={version}"])
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
