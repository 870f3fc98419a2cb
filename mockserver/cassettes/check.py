"""``mockserver cassettes check DIR``: the check CI runs before cassettes are committed.

Two questions, one exit status: does any file under DIR hold something that looks like a
credential (the patterns :mod:`mockserver.cassettes.redact` removes, plus any given with
``--pattern``), and does every cassette load whole with the code ``serve`` loads it with?
A file that is no cassette (see :mod:`mockserver.cassettes.files`: a README, an
``x.expected.json``) gets a line saying ``serve`` skips it, and does not fail the check; a
broken cassette does, as it stops ``serve``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TextIO

from mockserver.cassettes import redact
from mockserver.cassettes.files import CassetteDir, CassetteError, NotACassette, read
from mockserver.cassettes.matching import Index

__all__ = ["check_cassettes"]


def check_cassettes(path: str, patterns: Sequence[str] = (), out: TextIO | None = None) -> int:
    """The secrets scan (with ``patterns`` added to the built-in ones), then every cassette
    loaded with the code ``serve`` loads them with, and indexed as it indexes them, so "check
    passes" means "serve starts". A cassette that loads only in part (a torn append, ignored
    with a warning) fails too: a recording is missing.
    Exit status 1 on any finding, 2 for a missing ``path`` or a bad pattern, else 0."""
    stream = out if out is not None else sys.stdout
    with ExitStack() as stack:
        try:
            stack.enter_context(redact.added_patterns(*patterns))
        except ValueError as exc:
            print(f"mockserver: --pattern: {exc}", file=sys.stderr)
            return 2
        status = redact.check(path, stream)
        if status == 2:
            return status
        broken, skipped = _unloadable(path)
    for line in (*skipped, *broken):
        print(line, file=stream)
    if broken:
        print(f"{len(broken)} cassette(s) do not load whole: fix, re-record or delete them.", file=stream)
        return 1
    return status


class _Warnings(logging.Handler):
    """Collects the warnings a load logs: a torn tail is skipped with one, not raised."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _unloadable(path: str) -> tuple[list[str], list[str]]:
    """A line for each cassette under ``path`` that ``serve`` could not load whole, and one
    for each file there that ``serve`` skips as no cassette."""
    root = Path(path)
    if root.is_dir():
        cassettes = CassetteDir(root)
        files = [cassettes.root / name for name in sorted(cassettes.listing())]  # what serve reads
    else:
        files = [root]

    logger = logging.getLogger("mockserver")
    level = logger.level
    broken: list[str] = []
    skipped: list[str] = []
    for file in files:
        warnings = _Warnings()
        logger.addHandler(warnings)
        if logger.getEffectiveLevel() > logging.WARNING:
            logger.setLevel(logging.WARNING)
        try:
            Index(read(file))
        except NotACassette as exc:
            skipped.append(f"{file}: skipped, serve does not load it: not a cassette ({exc.reason})")
            continue
        except CassetteError as exc:
            cause = exc.__cause__
            reason = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
            broken.append(f"{file}: not a readable cassette, serve would not start: {_one_line(reason, file)}")
            continue
        except Exception as exc:  # whatever else stops serve from starting
            reason = _one_line(f"{type(exc).__name__}: {exc}", file)
            broken.append(f"{file}: not a readable cassette, serve would not start: {reason}")
            continue
        finally:
            logger.removeHandler(warnings)
            logger.setLevel(level)
        if warnings.messages:
            broken.append(f"{file}: loads only in part: {_one_line(warnings.messages[0], file)}")
    return broken, skipped


def _one_line(message: str, file: object) -> str:
    """A load error on one line, without the file's name again, and without anything that looks
    like a credential (a parser's message may quote the line it stopped at)."""
    message = message.removeprefix(f"{file}: ")
    line = " ".join(redact.redact_text(message).split())
    return line if len(line) <= 300 else line[:300] + "…"
