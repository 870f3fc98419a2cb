"""Who runs a stored response, and whether that process is still there.

Several server processes may share one SQLite or Redis store, and a response's run lives in the
process that created it. If that process dies (SIGKILL, a crash, a reboot) the response stays
``queued`` or ``in_progress`` for ever — unless another process can tell that its owner is gone,
and fail it. Each open store is an :class:`Owner`: a random token, the process id, where that id
means something (host name, boot id and pid namespace: :func:`place`), the process's start time
(so a reused pid is not taken for the owner) and a heartbeat the store renews every few seconds.

:func:`alive` judges an owner from another process. In the same place (host, boot, pid
namespace) the process table answers exactly: the pid is gone, a zombie, or another process
started since → gone; this very process → alive while the store is open here (:data:`LIVE`).
Anywhere else — another host on a shared disk, another container's pid namespace — only the
heartbeat can: the owner is gone once its lease (no heartbeat for ``lease`` seconds) expires.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LIVE", "Owner", "alive", "place", "process_start"]

# Tokens of the stores open in this process (an owner in this process is alive while its store is).
LIVE: set[str] = set()

_PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class Owner:
    token: str  # one per open store
    pid: int
    place: str  # where ``pid`` names a process: host name, boot id, pid namespace
    start: str | None  # the process's start (clock ticks since boot, from /proc), against pid reuse
    heartbeat: float  # wall-clock seconds of its last heartbeat


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


@functools.cache
def _host() -> str:
    return socket.gethostname()


def place() -> str:
    """Where a pid means this process's neighbours: host name, boot id and pid namespace (the
    last two on Linux; elsewhere just the host name)."""
    namespace = ""
    with contextlib.suppress(OSError):
        namespace = os.readlink("/proc/self/ns/pid")
    return f"{_host()}|{_read('/proc/sys/kernel/random/boot_id')}|{namespace}"


def _stat(pid: int | str) -> tuple[str, str] | None:
    """A process's state letter and start time, from /proc (None: no such process, or no /proc)."""
    try:
        data = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()  # the command name, in parentheses, may hold spaces
    return fields[0].decode(), fields[19].decode()  # fields 3 (state) and 22 (starttime)


def process_start() -> str | None:
    """This process's start time as /proc tells it (None without /proc)."""
    found = _stat("self")
    return found[1] if found is not None else None


def alive(owner: Owner, now: float, lease: float) -> bool:
    """Is ``owner`` still running? (See the module's docstring.) ``now`` is wall-clock time."""
    if owner.place != place():
        return now - owner.heartbeat < lease
    if owner.pid == os.getpid() and owner.start == process_start():
        return owner.token in LIVE
    if (_PROC / "self" / "stat").exists():
        found = _stat(owner.pid)
        if found is None or found[0] in ("Z", "X"):  # gone, or dead and not yet reaped
            return False
        return owner.start is None or found[1] == owner.start
    if sys.platform == "win32":  # os.kill would end the process: only the lease can tell
        return now - owner.heartbeat < lease
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: there is one
    return True
