"""Strings that match a JSON Schema ``pattern``: a small generator over Python's own regex parse tree.

Also :func:`search`, JSON Schema's (unanchored) pattern test. A construct we cannot generate
(lookarounds aside, which the final ``re.search`` check settles) raises :class:`Unsat` so the
caller retries or gives up cleanly.
"""

from __future__ import annotations

import importlib
import re
import string
from functools import lru_cache
from typing import Any

from mockserver.fakejson.algebra import Unsat

__all__ = ["from_pattern", "search"]


_PRINTABLE = string.ascii_letters + string.digits + " -_.,:;!?@#$%&*+=/()[]{}'\""
_CATEGORY = {
    "CATEGORY_DIGIT": (string.digits, str.isdigit),
    "CATEGORY_NOT_DIGIT": (string.ascii_letters + " -_.", lambda c: not c.isdigit()),
    "CATEGORY_SPACE": (" ", str.isspace),
    "CATEGORY_NOT_SPACE": (string.ascii_letters + string.digits, lambda c: not c.isspace()),
    "CATEGORY_WORD": (string.ascii_letters + string.digits + "_", lambda c: c.isalnum() or c == "_"),
    "CATEGORY_NOT_WORD": (" -.,!", lambda c: not (c.isalnum() or c == "_")),
}


@lru_cache(maxsize=512)
def _parsed(pattern: str) -> Any:
    """Python's own parse tree of the pattern (re._parser is private, so typed as Any)."""
    try:
        return importlib.import_module("re._parser").parse(pattern)
    except re.error as exc:
        raise Unsat(f"pattern {pattern!r} is not a regular expression: {exc}") from None


def search(pattern: str, text: str) -> bool:
    """JSON Schema's pattern test (unanchored); a pattern Python cannot compile matches nothing."""
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def from_pattern(pattern: str, rng: Any, extra: tuple[int, int]) -> str:
    """A string the pattern matches; each repeat runs ``extra`` (a range) beyond its minimum, within its maximum."""
    out: list[str] = []
    _emit(_parsed(pattern), rng, extra, out, {})
    return "".join(out)


def _emit(items: Any, rng: Any, extra: tuple[int, int], out: list[str], groups: dict[int, str]) -> None:
    for op, av in items:
        kind = str(op)
        if kind == "LITERAL":
            out.append(chr(av))
        elif kind == "NOT_LITERAL":
            out.append(rng.choice([c for c in _PRINTABLE if ord(c) != av]))
        elif kind == "ANY":
            out.append(rng.choice(string.ascii_letters + string.digits))
        elif kind == "IN":
            out.append(_class_char(av, rng))
        elif kind in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, sub = av
            for _ in range(rng.randint(min(hi, lo + extra[0]), min(hi, lo + extra[1]))):
                _emit(sub, rng, extra, out, groups)
        elif kind == "SUBPATTERN":
            start = len(out)
            _emit(av[-1], rng, extra, out, groups)
            if av[0]:
                groups[av[0]] = "".join(out[start:])
        elif kind == "ATOMIC_GROUP":
            _emit(av, rng, extra, out, groups)
        elif kind == "BRANCH":
            _emit(rng.choice(av[1]), rng, extra, out, groups)
        elif kind == "GROUPREF":
            out.append(groups.get(av, ""))
        elif kind == "GROUPREF_EXISTS":
            branch = av[1] if av[0] in groups else av[2]
            if branch is not None:
                _emit(branch, rng, extra, out, groups)
        elif kind not in ("AT", "ASSERT", "ASSERT_NOT"):  # anchors hold by construction; lookarounds: re.search decides
            raise Unsat(f"pattern construct {kind} is not supported")


def _class_char(items: Any, rng: Any) -> str:
    if items and str(items[0][0]) == "NEGATE":
        pool = [c for c in _PRINTABLE if not any(_in_item(c, op, av) for op, av in items[1:])]
        if not pool:
            raise Unsat("empty negated character class")
        return str(rng.choice(pool))
    op, av = rng.choice(items)
    kind = str(op)
    if kind == "LITERAL":
        return chr(av)
    if kind == "RANGE":
        return chr(rng.randint(*av))
    return str(rng.choice(_CATEGORY[str(av)][0]))


def _in_item(c: str, op: Any, av: Any) -> bool:
    kind = str(op)
    if kind == "LITERAL":
        return bool(ord(c) == av)
    if kind == "RANGE":
        return bool(av[0] <= ord(c) <= av[1])
    return kind == "CATEGORY" and bool(_CATEGORY[str(av)][1](c))
