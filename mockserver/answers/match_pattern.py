"""A scripted rule's ``match`` regular expression, which can never hold the event loop.

Rules are matched on the event loop, and a user's pattern run by ``re`` backtracks without
bound: ``(a+)+$`` against a 27-character prompt held every client (``/health`` included) for
~10 s. The guarantee relied on is the `regex <https://pypi.org/project/regex/>`_ module's
``timeout=`` argument: a search past its time raises ``TimeoutError`` from inside the
matcher, so one search costs at most :data:`SEARCH_TIMEOUT` whatever the pattern and text.

* **At definition** a pattern is compiled with ``regex`` (Python's ``re`` syntax, version 0)
  and probed: it is run against a few long runs built of its own literal characters (the
  texts that make a nested quantifier blow up). One that does not finish a probe within
  :data:`PROBE_TIMEOUT` (or all of them within :data:`PROBES_TIMEOUT`) is refused
  (``RuleError`` naming ``match``: a 400 from the admin API, a start-up error from
  ``--rules``), so a pathological pattern is never installed.
* **At match time** every search carries :data:`SEARCH_TIMEOUT`. A search that runs out (a
  pattern the probes did not catch, against a text built to defeat it) counts as *no match*
  and is logged once per pattern: the request goes on to the next rule or backend.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import regex

__all__ = ["PROBES_TIMEOUT", "PROBE_TIMEOUT", "SEARCH_TIMEOUT", "MatchPattern", "PatternError", "compiled"]

log = logging.getLogger("mockserver")

SEARCH_TIMEOUT = 0.01  # seconds one search of one text may take on the event loop (the module overshoots ~2-3x)
PROBE_TIMEOUT = 0.02  # seconds one probe may take when a rule is defined
PROBES_TIMEOUT = 0.1  # seconds all of a pattern's probes may take together (the definition's bound)
# Characters of each probe: enough for exponential backtracking to show, short enough that a
# quadratic pattern (``w.*r``) passes.
_PROBE_LENGTH = 512
_TAILS = ("!", "\n", "\x00", "")  # what ends a probe: a character nothing expects makes it backtrack


class PatternError(ValueError):
    """A ``match`` that does not compile, or that backtracks without bound on a probe."""


class MatchPattern:
    """A compiled ``match``: ``.pattern`` is its source; :meth:`search` is bounded in time."""

    __slots__ = ("_compiled", "_warned", "pattern")

    def __init__(self, pattern: str) -> None:
        try:
            self._compiled: Any = regex.compile(pattern, regex.VERSION0)
        except (regex.error, ValueError, OverflowError, RecursionError) as exc:
            raise PatternError(f"is not a valid regular expression: {exc}") from None
        self.pattern = pattern
        self._warned = False
        if not any(c in pattern for c in "*+{"):
            return  # no repetition: nothing to backtrack over, linear in the text
        deadline = time.monotonic() + PROBES_TIMEOUT
        for probe in _probes(pattern):
            try:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self._compiled.search(probe, timeout=min(PROBE_TIMEOUT, left))
            except TimeoutError:
                shown = probe[:12] + "…" if len(probe) > 12 else probe
                raise PatternError(
                    f"backtracks without bound (a search of {len(probe)} characters like {shown!r} took over "
                    f"{PROBE_TIMEOUT * 1000:.0f} ms): rewrite it without nested or overlapping repetition, "
                    "e.g. '(a+)+' as 'a+'"
                ) from None

    def search(self, text: str) -> bool:
        """Does the pattern occur in ``text``? A search past :data:`SEARCH_TIMEOUT` is *no*."""
        try:
            return self._compiled.search(text, timeout=SEARCH_TIMEOUT) is not None
        except TimeoutError:
            if not self._warned:
                self._warned = True
                log.warning(
                    "scripted rule: match %r ran past %.0f ms on a %d-character text; counted as no match",
                    self.pattern,
                    SEARCH_TIMEOUT * 1000,
                    len(text),
                )
            return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MatchPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"MatchPattern({self.pattern!r})"


def _probes(pattern: str) -> list[str]:
    """Long runs of the characters the pattern names (each alone, and all of them in turn),
    and of a few common classes' members, each ended by a character that fails the match."""
    literal = sorted({c for c in pattern if c.isalnum() or c in " -_.,:;/@"} | {"a", "0", " "})
    seeds = [*literal[:24], "".join(literal[:24]), "ab", "a "]
    found: list[str] = []
    for seed in seeds:
        run = (seed * (_PROBE_LENGTH // len(seed) + 1))[:_PROBE_LENGTH]
        found += [run + tail for tail in _TAILS]
    return found


_KNOWN: dict[str, MatchPattern] = {}  # source → compiled and probed (a shared state reloads every rule)


def compiled(pattern: str) -> MatchPattern:
    """:class:`MatchPattern` of ``pattern``, probed once per process however often its rule is
    read again (up to 4,096 patterns are remembered)."""
    found = _KNOWN.get(pattern)
    if found is None:
        found = MatchPattern(pattern)
        if len(_KNOWN) >= 4096:
            _KNOWN.clear()
        _KNOWN[pattern] = found
    return found
