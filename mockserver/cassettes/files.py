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
* **Appends cost the same at 10 or 10,000 interactions** (YAML cassettes): :func:`append`
  writes the new interactions at the end of the file (``O_APPEND``, then fsync), in the
  appendable layout of :mod:`mockserver.cassettes.format` — ``version: 1`` first, the
  interactions last, each closed by a ``# end`` line. A cassette in vcrpy's own layout (or
  written by :func:`save`) is rewritten in that layout once, atomically, by its first append.
  A process killed mid-append leaves at most a torn last item after the last ``# end``: every
  load ignores it (with a warning), and the next append cuts it off (``ftruncate``) before
  writing, so the file never holds a torn item anywhere else. JSON cassettes are still
  rewritten whole (their closing brackets come last).
* **One writer at a time**: a ``threading.Lock`` per file serialises threads, and coroutines
  through :meth:`CassetteDir.append_async` (which writes from a worker thread, so fsync never
  blocks the event loop); an ``flock`` on the directory serialises processes. Every append
  works on the file as it is under the lock, so concurrent recorders never lose each other's
  interactions.
* **What is a cassette**: a ``.yaml``, ``.yml`` or ``.json`` file that is empty or whose top
  level has an ``interactions`` key (vcrpy's layout and ours). Anything else in the directory —
  a README, notes, an ``x.expected.json`` a test compares against — is not one: :func:`read`
  raises :class:`NotACassette` for it and the server skips it with one warning line. A file
  that *is* one but does not load (a ``.yaml`` that does not parse yet has a top-level
  ``interactions:`` line, a JSON cut short after ``"interactions":``, an unsafe tag, an
  interaction missing its response) raises :class:`CassetteError`: a broken cassette, which
  stops ``serve`` and fails ``mockserver cassettes check``.
"""

from __future__ import annotations

import asyncio
import errno
import glob
import json
import logging
import os
import re
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath, PureWindowsPath

import yaml

from mockserver.cassettes.format import (
    APPEND_END,
    APPEND_HEADER,
    Interaction,
    complete,
    dump_items,
    dumps,
    dumps_appendable,
    loads,
)

__all__ = [
    "MAX_NAME",
    "SUFFIXES",
    "CassetteDir",
    "CassetteError",
    "NotACassette",
    "Reservation",
    "Signature",
    "append",
    "check_name",
    "file_name",
    "load",
    "read",
    "reserve",
    "resolve_name",
    "save",
]

SUFFIXES = (".yaml", ".yml", ".json")

_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()

log = logging.getLogger("mockserver")

_HEADER = APPEND_HEADER.encode()
_END_LINE = b"\n" + APPEND_END.encode()
_CHUNK = 1 << 16  # bytes read at a time when looking back for the last whole item


class CassetteError(ValueError):
    """A cassette file that cannot be read as one; the message names the file."""


class NotACassette(ValueError):
    """A file in the cassette directory that is no cassette at all (see the module doc); the
    message names it and says why (``reason``)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: not a cassette ({reason})")
        self.reason = reason


# What a re-scan compares to see a file changed: (st_mtime_ns, st_size). A copy in progress
# changes both, so the copy is read again once it is complete.
Signature = tuple[int, int]

# A top-level ``interactions`` key, as far as text that does not parse shows it: a YAML line
# starting ``interactions:``, a JSON key ``"interactions":``.
_TOP_LEVEL = {"yaml": re.compile(r"^interactions[ \t]*:", re.MULTILINE), "json": re.compile(r'"interactions"\s*:')}


def _format(path: Path) -> str:
    return "json" if path.suffix == ".json" else "yaml"


MAX_NAME = 255  # characters in a cassette name
# Bytes (UTF-8) in one part of a name: filesystems allow 255 per file name, and the stored name
# grows by its suffix and, while it is written, by the temporary file's ``.NAME.XXXXXXXX.tmp``.
MAX_PART = 200


def check_name(name: str) -> None:
    """``ValueError`` saying why ``name`` cannot name a cassette: empty, over :data:`MAX_NAME`
    characters (or a part over :data:`MAX_PART` bytes), holding a NUL, absolute, or with a
    ``..`` part. No filesystem access: a name from a request header is checked before anything
    is read, written or fetched for it."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid cassette name {name[:40]!r}")
    if len(name) > MAX_NAME:
        raise ValueError(f"cassette name of {len(name)} characters: at most {MAX_NAME}")
    posix, windows = PurePosixPath(name), PureWindowsPath(name)
    if posix.is_absolute() or windows.is_absolute() or windows.drive:
        raise ValueError(f"cassette name {name!r} must be relative to the cassette directory")
    if ".." in posix.parts or ".." in windows.parts:
        raise ValueError(f"cassette name {name!r} must not contain '..'")
    if any(len(part.encode("utf-8", "surrogatepass")) > MAX_PART for part in posix.parts):
        raise ValueError(f"a part of cassette name {name[:40]!r}… is over {MAX_PART} bytes")


def resolve_name(root: Path, name: str) -> Path:
    """The real path of cassette ``name`` under ``root``; ``.yaml`` is added when ``name``
    has none of :data:`SUFFIXES`. Raises ``ValueError`` for names that :func:`check_name`
    refuses or that leave ``root`` (through a symlink)."""
    check_name(name)
    posix = PurePosixPath(name)
    relative = posix if posix.suffix in SUFFIXES else posix.with_name(posix.name + ".yaml")
    real_root = root.resolve()
    try:
        real = (real_root / relative).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, a part the OS will not take
        raise ValueError(f"cassette name {name!r} does not resolve: {type(exc).__name__}") from None
    if not real.is_relative_to(real_root):
        raise ValueError(f"cassette name {name!r} resolves outside the cassette directory {root} (a symlink?)")
    return real


def load(path: Path) -> tuple[Interaction, ...]:
    """A cassette file's interactions (redacted). Raises :class:`CassetteError` if the file
    is not a cassette, ``FileNotFoundError`` if it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
        if _format(path) == "yaml":
            text, torn = complete(text)
            if torn:
                log.warning("%s: ignoring the last %d characters, an append cut short (by a crash?)", path, torn)
        return loads(text, _format(path))
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise CassetteError(f"{path}: not a readable cassette: {exc}") from exc


def read(path: Path) -> tuple[Interaction, ...]:
    """:func:`load`, for a file found in the cassette directory: :class:`NotACassette` for one
    that is no cassette (skipped), :class:`CassetteError` for a cassette that does not load."""
    if path.suffix not in SUFFIXES:
        raise NotACassette(path, "not .yaml, .yml or .json")
    try:
        return load(path)
    except CassetteError as exc:
        reason = _not_a_cassette(path)
        if reason is None:
            raise
        raise NotACassette(path, reason) from exc


def _not_a_cassette(path: Path) -> str | None:
    """Why a file that failed to load is no cassette at all, or None if it is a broken one.
    Only a failed load pays for this second look."""
    fmt = _format(path)
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None
    try:
        data = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError):
        if _TOP_LEVEL[fmt].search(text):
            return None  # a cassette cut short or damaged
        return f"does not parse as {fmt.upper()}"
    if isinstance(data, dict) and "interactions" in data:
        return None
    return "its top level has no 'interactions'"


def file_name(name: str) -> str:
    """The file a cassette name stands for, relative to the directory: ``chat/stream`` is
    ``chat/stream.yaml`` (as :func:`resolve_name` makes it, without touching the disk)."""
    posix = PurePosixPath(name)
    return (posix if posix.suffix in SUFFIXES else posix.with_name(posix.name + ".yaml")).as_posix()


def save(path: Path, interactions: Iterable[Interaction]) -> None:
    """Write ``interactions`` (redacted) as the whole cassette at ``path``, atomically."""
    text = dumps(interactions, _format(path))
    with _locked(path):
        _write(path, text)


def append(path: Path, interactions: Iterable[Interaction]) -> None:
    """Add ``interactions`` after those already in ``path``, under the lock. A YAML cassette
    gets them written at its end (a constant cost, whatever its size); a JSON one is re-read
    and rewritten whole."""
    new = tuple(interactions)
    with _locked(path):
        if _format(path) == "yaml":
            _append_yaml(path, new)
        else:
            existing = load(path) if path.exists() else ()
            _write(path, dumps(existing + new, _format(path)))


def _append_yaml(path: Path, new: tuple[Interaction, ...]) -> None:
    """Caller holds the path's lock. Creates the file, or moves it to the appendable layout,
    with an atomic rewrite; else cuts a torn tail off and appends, then fsyncs."""
    items = dump_items(new)
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        _write(path, APPEND_HEADER + items)
        return
    try:
        if _read_at(fd, 0, len(_HEADER)) != _HEADER:  # vcrpy's layout, save()'s, or an empty file
            existing = load(path)
            _write(path, dumps_appendable(existing) + items)
            return
        _cut_torn_tail(fd, path)
        if items:
            size = os.fstat(fd).st_size
            try:
                _write_all(fd, items.encode())
                os.fsync(fd)
            except OSError:
                # A full disk (ENOSPC, EDQUOT) or an I/O error mid-append: give the file back as
                # it was, so the cassette's earlier recordings stay whole and nothing torn is left.
                with suppress(OSError):
                    os.ftruncate(fd, size)
                raise
    finally:
        os.close(fd)


def _read_at(fd: int, offset: int, size: int) -> bytes:
    os.lseek(fd, offset, os.SEEK_SET)
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.read(fd, size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _cut_torn_tail(fd: int, path: Path) -> None:
    """Truncate whatever follows the last END line (or the header): what an append killed
    midway left. Only the tail is read, and only after such a crash is more of it read."""
    size = os.fstat(fd).st_size
    if size == len(_HEADER):
        return  # the header, no interaction yet
    if size > len(_HEADER) and _read_at(fd, size - len(_END_LINE), len(_END_LINE)) == _END_LINE:
        return  # the last item is whole: the usual case, one small read
    whole = len(_HEADER)
    position = size
    while position > len(_HEADER):  # back, a chunk at a time (overlapping by the END line)
        start = max(len(_HEADER) - 1, position - _CHUNK)
        data = _read_at(fd, start, min(size, position + len(_END_LINE) - 1) - start)
        found = data.rfind(_END_LINE)
        if found >= 0:
            whole = start + found + len(_END_LINE)
            break
        position = start
    log.warning("%s: cutting off %d bytes of an append cut short (by a crash?) before appending", path, size - whole)
    os.ftruncate(fd, whole)


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


class Reservation:
    """Room for one recording, taken before its upstream is asked (see :func:`reserve`): a
    hidden ``.NAME.*.reserve`` file holding ``size`` bytes of the cassette's filesystem.
    :meth:`release` gives the room back just before the recording is written into it."""

    def __init__(self, path: Path | None, fd: int | None) -> None:
        self._path = path
        self._fd = fd

    def release(self) -> None:
        fd, path = self._fd, self._path
        self._fd = self._path = None
        if fd is not None:
            with suppress(OSError):
                os.close(fd)
        if path is not None:
            with suppress(OSError):
                path.unlink()


def reserve(path: Path, size: int) -> Reservation:
    """Check that cassette ``path`` can be written and take ``size`` bytes of its filesystem
    for it, or raise the ``OSError`` that says why not (``ENOSPC`` on a full disk, ``EROFS``
    on a read-only one, ``EACCES``…). Nothing of the cassette is touched: the folder is made
    if missing, an existing file is opened for appending (and closed), and the room is a
    hidden file (``posix_fallocate``: allocated for real, not a sparse promise) that no
    listing shows; one a killed process left is removed when the next server starts
    (:meth:`CassetteDir.clear_reservations`)."""
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    if path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_BINARY", 0)))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".reserve")
    held = Reservation(Path(tmp), fd)
    try:
        if hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
                _write_all(fd, bytes(size))  # a filesystem without fallocate: zeros take the room
        else:
            _write_all(fd, bytes(size))
    except BaseException:
        held.release()
        raise
    return held


class CassetteDir:
    """The cassette directory: every cassette by name, confined to ``root``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def resolve(self, name: str) -> Path:
        return resolve_name(self.root, name)

    def listing(self) -> dict[str, Signature]:
        """Every visible file under the root, cassette or not (relative name → its
        :data:`Signature`), leaving out hidden files and folders (a killed writer's temporary
        file) and anything a symlink places outside. One ``scandir`` and one ``stat`` a file:
        what a re-scan on a replay miss costs when nothing changed."""
        found: dict[str, Signature] = {}
        real_root: Path | None = None  # resolved only when a symlink asks where it leads
        folders: list[tuple[str, str]] = [(os.fspath(self.root), "")]
        while folders:
            folder, prefix = folders.pop()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        if entry.name.startswith("."):
                            continue
                        relative = prefix + entry.name
                        try:
                            if entry.is_dir(follow_symlinks=False):
                                folders.append((entry.path, relative + "/"))
                                continue
                            if entry.is_symlink():
                                real_root = real_root or self.root.resolve()
                                if not Path(entry.path).resolve().is_relative_to(real_root):
                                    continue
                            info = entry.stat()
                        except (OSError, RuntimeError):  # gone meanwhile, or a symlink loop
                            continue
                        if stat.S_ISREG(info.st_mode):
                            found[relative] = (info.st_mtime_ns, info.st_size)
            except OSError:  # no such folder (yet), or removed meanwhile: nothing there to replay
                continue
        return found

    def names(self) -> list[str]:
        """Every file under the root with a cassette's suffix (relative, with suffix), as
        :meth:`listing` finds them; :meth:`read` says which of them really are cassettes."""
        return sorted(name for name in self.listing() if PurePosixPath(name).suffix in SUFFIXES)

    def signature(self, name: str) -> Signature | None:
        """The :data:`Signature` of cassette ``name``'s file now (None: there is none)."""
        try:
            info = self.resolve(name).stat()
        except (OSError, ValueError):
            return None
        return (info.st_mtime_ns, info.st_size)

    def exists(self, name: str) -> bool:
        return self.resolve(name).is_file()

    def load(self, name: str) -> tuple[Interaction, ...]:
        return load(self.resolve(name))

    def read(self, name: str) -> tuple[Interaction, ...]:
        """:func:`read` of a file :meth:`listing` found (its name as listed: no suffix is
        added, so ``README.md`` is read as itself and found to be no cassette)."""
        check_name(name)
        path = self.root / name
        if not path.resolve().is_relative_to(self.root.resolve()):
            raise ValueError(f"{name!r} resolves outside the cassette directory {self.root} (a symlink?)")
        return read(path)

    def load_all(self) -> dict[str, tuple[Interaction, ...]]:
        """Every cassette, by name; a file that is none (see the module doc) is skipped with
        one warning line naming it. Writes are atomic, so each file under its final name is
        complete; a cassette that still fails to load raises :class:`CassetteError` naming it."""
        found: dict[str, tuple[Interaction, ...]] = {}
        for name in sorted(self.listing()):
            try:
                found[name] = self.read(name)
            except NotACassette as exc:
                log.warning("cassettes: skipping %s", exc)
        return found

    def save(self, name: str, interactions: Iterable[Interaction]) -> None:
        save(self.resolve(name), interactions)

    def append(self, name: str, interactions: Iterable[Interaction]) -> None:
        append(self.resolve(name), interactions)

    def clear_reservations(self) -> None:
        """Remove the ``.*.reserve`` files a killed server left (see :func:`reserve`)."""
        with suppress(OSError):
            for stale in self.root.rglob(".*.reserve"):
                with suppress(OSError):
                    stale.unlink()

    async def reserve_async(self, name: str, size: int) -> Reservation:
        """:func:`reserve` for cassette ``name``, from a worker thread."""
        return await asyncio.to_thread(reserve, self.resolve(name), size)

    async def append_async(self, name: str, interactions: Iterable[Interaction]) -> None:
        """:meth:`append` from a worker thread: the event loop keeps serving meanwhile."""
        path = self.resolve(name)
        await asyncio.to_thread(append, path, tuple(interactions))
