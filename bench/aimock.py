"""aimock (``@copilotkit/aimock``, a Node mock server for LLM APIs) as a peer server in ``bench/spine.py``.

``package()`` fetches the published tarball with ``npm pack`` into ``bench/.aimock/`` (git-ignored)
and unpacks it there once; later runs reuse the unpacked copy, so only the first run needs the
registry. The package declares no dependencies (Node builtins only), so there is no
``npm install``: ``node dist/cli.js`` runs straight from the unpacked tree.

The server is started with the package's ``llmock`` bin (``dist/cli.js``), the command line that
takes ``--fixtures``, ``--port`` and ``--host`` (and the Docker image's entrypoint); the ``aimock``
bin takes only a ``--config`` file. It runs directly under ``node`` (not ``npx``), so the child
the benchmark starts *is* the server and ``/proc/<pid>`` counts the server's own CPU.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from bench.procs import HOST

__all__ = ["NAME", "SPEC", "Unavailable", "command", "node", "package", "stream_chunk_size", "write_fixture"]

PACKAGE = "@copilotkit/aimock"
VERSION = "1.43.0"
SPEC = f"{PACKAGE}@{VERSION}"
NAME = "aimock 1.43"  # the server's name in the report's rows
CACHE = Path(__file__).resolve().parent / ".aimock"


class Unavailable(RuntimeError):
    """aimock cannot run on this machine (no npm or node, registry out of reach, Node too old)."""


def package(cache: Path = CACHE) -> Path:
    """The unpacked package (the folder holding ``package.json``), fetched with ``npm pack`` only
    when the cache does not hold this version yet."""
    unpacked = cache / VERSION / "package"
    if _version(unpacked) == VERSION:
        return unpacked
    cache.mkdir(parents=True, exist_ok=True)
    _unpack(_pack(cache), cache / VERSION)
    if _version(unpacked) != VERSION:
        raise Unavailable(f"{SPEC}: the tarball did not unpack to package/package.json of version {VERSION}")
    return unpacked


def _version(unpacked: Path) -> str | None:
    try:
        version = json.loads((unpacked / "package.json").read_text()).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def _pack(cache: Path) -> Path:
    """``npm pack`` into ``cache``: the registry's tarball, checked by npm against its integrity hash."""
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not on PATH")
    try:
        done = subprocess.run(
            [npm, "pack", SPEC, "--pack-destination", str(cache), "--json"],
            cwd=cache,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"npm pack {SPEC}: {exc}") from exc
    if done.returncode != 0:
        why = "; ".join(done.stderr.strip().splitlines()[:4])  # npm's code and reason; the stack trace follows
        raise Unavailable(f"npm pack {SPEC} exited with {done.returncode}: {why}")
    try:
        filename = json.loads(done.stdout)[0]["filename"]
    except (ValueError, LookupError, TypeError) as exc:
        raise Unavailable(f"npm pack {SPEC}: unexpected output {done.stdout[-500:]!r}") from exc
    return cache / Path(filename).name


def _unpack(tarball: Path, target: Path) -> None:
    """Extract into a sibling temporary folder, then rename: an interrupted run never leaves a
    half-unpacked tree that a later run would take for the package."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        with tarfile.open(tarball) as tar:
            tar.extractall(staging, filter="data")
        staging.chmod(0o755)  # mkdtemp's 0700 is for while it is incomplete
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def node(unpacked: Path) -> str:
    """The ``node`` on PATH, if it satisfies the package's ``engines.node`` (``>=X.Y.Z``)."""
    path = shutil.which("node")
    if path is None:
        raise Unavailable("node is not on PATH")
    done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    have = _triple(done.stdout)
    engines = json.loads((unpacked / "package.json").read_text()).get("engines", {}).get("node", "")
    need = _triple(engines) if engines.startswith(">=") else None
    if have is None or (need is not None and have < need):
        raise Unavailable(f"{SPEC} needs node {engines or '(any)'}; {path} is {done.stdout.strip() or 'unknown'}")
    return path


def _triple(text: str) -> tuple[int, int, int] | None:
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return (int(found.group(1)), int(found.group(2)), int(found.group(3))) if found else None


def write_fixture(path: Path, text: str) -> Path:
    """One fixture answering every chat completion with ``text``, as the scripted mockserver's rule
    without ``match`` does: an empty ``match`` is aimock's catch-all (its validator only objects
    when a catch-all shadows later fixtures, and this is the only one)."""
    path.write_text(json.dumps({"fixtures": [{"match": {}, "response": {"content": text}}]}, indent=2) + "\n")
    return path


def stream_chunk_size(text: str, tokens: int) -> int:
    """aimock streams content in fixed runs of characters (``--chunk-size``, 20 by default), where
    mockserver sends one token per frame: this many characters per frame sends ``text`` in about
    ``tokens`` frames, so both streams carry about as many writes and the stream cells compare."""
    return max(1, math.ceil(len(text) / tokens))


def command(unpacked: Path, node_path: str, port: int, fixture: Path, chunk_size: int) -> list[str]:
    """The server on ``HOST:port``; warnings only in its log, as the mockserver servers run."""
    return [
        node_path,
        str(unpacked / "dist" / "cli.js"),
        "--host",
        HOST,
        "--port",
        str(port),
        "--fixtures",
        str(fixture),
        "--chunk-size",
        str(chunk_size),
        "--log-level",
        "warn",
    ]
