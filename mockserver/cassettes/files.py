"""Cassette files: names kept inside one directory, atomic writes, one writer at a time.

* **Names** are relative paths inside the cassette directory (``chat/stream`` is
  ``chat/stream.yaml``). ``..``, absolute paths and symlinks that lead outside are refused
  with a ``ValueError``: a name may come from a request header or a test id, and must not
  become a way to read or overwrite an arbitrary file.
* **Atomic writes**: the text goes to a hidden temporary file in the same directory (same
  filesystem, so the rename is atomic), is fsynced, then ``os.replace``-d over the final
  name, and the directory is fsynced so the rename survives a power cut. Readers see the old
  cassette or the new one, never half of one; a process killed mid-write leaves at most a
  hidden ``.NAME.*.tmp``, which no listing includes and the next write of NAME removes.
* **One writer at a time**: a ``threading.Lock`` per file serialises threads, and coroutines
  through :meth:`CassetteDir.append_async` (which writes from a worker thread, so fsync never
  blocks the event loop); an ``flock`` on the directory serialises processes. :func:`append`
  re-reads the file under the lock, so concurrent recorders never lose each other's
  interactions.
"""

from __future__ import annotations

import asyncio
import glob
import os
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath, PureWindowsPath

import yaml

from mockserver.cassettes.format import Interaction, dumps, loads

__all__ = ["SUFFIXES", "CassetteDir", "CassetteError", "append", "load", "resolve_name", "save"]

SUFFIXES = (".yaml", ".yml", ".json")

_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


class CassetteError(ValueError):
    """A cassette file that cannot be read as one; the message names the file."""


def _format(path: Path) -> str:
    return "json" if path.suffix == ".json" else "yaml"


def resolve_name(root: Path, name: str) -> Path:
    """The real path of cassette ``name`` under ``root``; ``.yaml`` is added when ``name``
    has none of :data:`SUFFIXES`. Raises ``ValueError`` for names that leave ``root``."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid cassette name {name!r}")
    posix, windows = PurePosixPath(name), PureWindowsPath(name)
    if posix.is_absolute() or windows.is_absolute() or windows.drive:
        raise ValueError(f"cassette name {name!r} must be relative to the cassette directory")
    if ".." in posix.parts or ".." in windows.parts:
        raise ValueError(f"cassette name {name!r} must not contain '..'")
    relative = posix if posix.suffix in SUFFIXES else posix.with_name(posix.name + ".yaml")
    real_root = root.resolve()
    real = (real_root / relative).resolve()
    if not real.is_relative_to(real_root):
        raise ValueError(f"cassette name {name!r} resolves outside the cassette directory {root} (a symlink?)")
    return real


def load(path: Path) -> tuple[Interaction, ...]:
    """A cassette file's interactions (redacted). Raises :class:`CassetteError` if the file
    is not a cassette, ``FileNotFoundError`` if it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
        return loads(text, _format(path))
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise CassetteError(f"{path}: not a readable cassette: {exc}") from exc


def save(path: Path, interactions: Iterable[Interaction]) -> None:
    """Write ``interactions`` (redacted) as the whole cassette at ``path``, atomically."""
    text = dumps(interactions, _format(path))
    with _locked(path):
        _write(path, text)


def append(path: Path, interactions: Iterable[Interaction]) -> None:
    """Add ``interactions`` after those already in ``path`` (re-read under the lock).
    Rewrites the whole file each time: cheap for the hundreds a recording session makes."""
    new = tuple(interactions)
    with _locked(path):
        existing = load(path) if path.exists() else ()
        _write(path, dumps(existing + new, _format(path)))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path = path.resolve()
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(path, threading.Lock())
    with lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        if sys.platform == "win32":  # no flock there; threads are still serialised
            yield
            return
        import fcntl

        fd = os.open(path.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd closes
            yield
        finally:
            os.close(fd)


def _write(path: Path, text: str) -> None:
    """Temp file + fsync + rename + directory fsync. Caller holds the path's lock."""
    directory = path.parent
    for stale in directory.glob(f".{glob.escape(path.name)}.*.tmp"):  # left by a writer that was killed
        with suppress(OSError):
            stale.unlink()
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    if sys.platform != "win32":
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class CassetteDir:
    """The cassette directory: every cassette by name, confined to ``root``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def resolve(self, name: str) -> Path:
        return resolve_name(self.root, name)

    def names(self) -> list[str]:
        """Every cassette under the root (relative, with suffix), skipping hidden files such
        as a killed writer's temporary file, and anything a symlink places outside."""
        if not self.root.is_dir():
            return []
        found: list[str] = []
        for path in self.root.rglob("*"):
            relative = path.relative_to(self.root)
            if path.suffix not in SUFFIXES or any(part.startswith(".") for part in relative.parts):
                continue
            with suppress(ValueError):
                if self.resolve(relative.as_posix()).is_file():
                    found.append(relative.as_posix())
        return sorted(found)

    def exists(self, name: str) -> bool:
        return self.resolve(name).is_file()

    def load(self, name: str) -> tuple[Interaction, ...]:
        return load(self.resolve(name))

    def load_all(self) -> dict[str, tuple[Interaction, ...]]:
        """Every cassette, by name. Writes are atomic, so each file under its final name is
        complete; one that still fails to load raises :class:`CassetteError` naming it."""
        return {name: self.load(name) for name in self.names()}

    def save(self, name: str, interactions: Iterable[Interaction]) -> None:
        save(self.resolve(name), interactions)

    def append(self, name: str, interactions: Iterable[Interaction]) -> None:
        append(self.resolve(name), interactions)

    async def append_async(self, name: str, interactions: Iterable[Interaction]) -> None:
        """:meth:`append` from a worker thread: the event loop keeps serving meanwhile."""
        path = self.resolve(name)
        await asyncio.to_thread(append, path, tuple(interactions))
