"""Secrets never land in a cassette: redaction on write and on load, and a scan for CI.

A recording proxies real traffic, so the caller's ``Authorization`` header, an API key
pasted into a prompt or a ``?api_key=`` query parameter would otherwise be written to a
file that gets committed. Three layers keep them out:

* **headers** named in :data:`SENSITIVE_HEADERS` keep their name (the cassette still shows
  that one was sent) and lose their value;
* **values** that look like credentials wherever they appear — ``sk-…`` keys (OpenAI,
  Anthropic, OpenRouter), bearer tokens, Fireworks ``fw_…`` and Google ``AIza…`` keys and
  credential-named query parameters — are cut down to their prefix and ``REDACTED``;
* :func:`scan` reads files as text (and as YAML when they parse, so a value the dumper
  folded across lines is still seen) and reports every credential still present, with
  file and line; ``mockserver cassettes check DIR`` fails CI on any finding.

The patterns skip values that already read ``REDACTED``, so redaction is idempotent and a
redacted cassette scans clean. This module depends on nothing else in mockserver.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

__all__ = [
    "REDACTED",
    "SENSITIVE_HEADERS",
    "Finding",
    "check",
    "find_secrets",
    "redact_bytes",
    "redact_headers",
    "redact_text",
    "redact_uri",
    "scan",
    "secret_parameter",
]

REDACTED = "REDACTED"

# Lower-case names. openai-organization/-project identify the account and come back in
# responses too; cookies carry sessions.
SENSITIVE_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "openai-organization",
        "openai-project",
        "cookie",
        "set-cookie",
    }
)

_QUERY_NAMES = r"(?i:api[_-]?key|key|access[_-]?token|token|client[_-]?secret|secret|password)"

# (kind, literal every match contains, pattern). Group 1 is the part that stays (a prefix
# that tells a reader what was there); the rest becomes REDACTED. Bearer tokens must contain
# a digit and be 16+ long so prose such as "Bearer authentication" is left alone; the query
# pattern needs a ``?``/``&`` so code samples like ``api_key=os.environ[...]`` in a recorded
# answer are not flagged. The literal is tested first: a pattern that opens with a
# lookbehind gets no prefix scan from ``re`` and costs ~10 µs per 300 bytes otherwise.
_PATTERNS: tuple[tuple[str, str, str], ...] = (
    ("sk- key", "sk-", r"(?<![A-Za-z0-9_-])(sk-)(?!REDACTED)[A-Za-z0-9_-]{20,}"),
    ("bearer token", "", r"((?i:bearer)\s+)(?!REDACTED)(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{16,}"),
    ("fireworks key", "fw_", r"(?<![A-Za-z0-9_])(fw_)(?!REDACTED)[A-Za-z0-9]{20,}"),
    ("google api key", "AIza", r"(?<![A-Za-z0-9_])(AIza)(?!REDACTED)[0-9A-Za-z_-]{35}"),
    ("secret query parameter", "=", r"([?&]" + _QUERY_NAMES + r"=)(?!REDACTED)[^&#\s\"'<>\\]{6,}"),
)
_TEXT = tuple((kind, literal, re.compile(p)) for kind, literal, p in _PATTERNS)
_BYTES = tuple((literal.encode(), re.compile(p.encode())) for _, literal, p in _PATTERNS)
# In a URI every credential-named parameter goes, however short its value.
_URI_QUERY = re.compile(r"([?&]" + _QUERY_NAMES + r"=)(?!REDACTED(?:[&#]|$))[^&#]+")
_QUERY_NAME = re.compile(_QUERY_NAMES)


def secret_parameter(name: str) -> bool:
    """Is query parameter ``name`` one whose value :func:`redact_uri` removes?"""
    return _QUERY_NAME.fullmatch(name) is not None


def redact_text(text: str) -> str:
    """``text`` with every credential-looking value replaced by its prefix + ``REDACTED``."""
    for _, literal, pattern in _TEXT:
        if literal in text:
            text = pattern.sub(r"\g<1>" + REDACTED, text)
    return text


def redact_bytes(data: bytes) -> bytes:
    """:func:`redact_text` on raw bytes, so bodies that are not UTF-8 are covered too."""
    for literal, pattern in _BYTES:
        if literal in data:
            data = pattern.sub(rb"\g<1>" + REDACTED.encode(), data)
    return data


def redact_uri(uri: str) -> str:
    """A URI without credentials: credential-named query values and key-looking values go."""
    return redact_text(_URI_QUERY.sub(r"\g<1>" + REDACTED, uri))


def redact_headers(headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Sensitive headers keep their name with the value ``REDACTED``; others are scrubbed
    of key-looking values (a custom header may carry one)."""
    return tuple(
        (name, REDACTED if name.lower() in SENSITIVE_HEADERS else redact_text(value)) for name, value in headers
    )


def find_secrets(text: str) -> Iterator[tuple[str, re.Match[str]]]:
    """Every credential-looking value in ``text``, as (kind, match)."""
    for kind, literal, pattern in _TEXT:
        if literal in text:
            yield from ((kind, match) for match in pattern.finditer(text))


@dataclass(frozen=True, slots=True)
class Finding:
    """A credential left in a file. ``excerpt`` is masked: CI logs must not leak it again."""

    path: Path
    line: int  # 1-based
    kind: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}: {self.excerpt}"


def _mask(secret: str) -> str:
    secret = secret.strip()
    return f"{secret[:7]}… ({len(secret)} chars)" if len(secret) > 10 else f"… ({len(secret)} chars)"


def scan(path: str | os.PathLike[str]) -> list[Finding]:
    """Credentials in a file, or in every file under a directory, sorted by file and line.

    Every file is read as text, so a cassette that no longer parses (or a stray temporary
    file) is still checked.
    """
    root = Path(path)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    findings: list[Finding] = []
    for file in files:
        findings.extend(_scan_file(file))
    return sorted(findings, key=lambda f: (str(f.path), f.line, f.kind))


def _scan_file(path: Path) -> list[Finding]:
    text = path.read_bytes().decode("utf-8", errors="replace")
    seen: set[tuple[int, str, str]] = set()
    found: list[Finding] = []

    def add(line: int, kind: str, secret: str) -> None:
        if (line, kind, secret) not in seen:
            seen.add((line, kind, secret))
            found.append(Finding(path, line, kind, _mask(secret)))

    for number, source_line in enumerate(text.split("\n"), start=1):
        for kind, match in find_secrets(source_line):
            add(number, kind, match.group(0))
    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return found  # not YAML (or JSON): the line pass above is all we can do
    if node is not None:
        for number, kind, secret in _scan_node(node, text):
            add(number, kind, secret)
    return found


def _scan_node(root: yaml.Node, text: str) -> Iterator[tuple[int, str, str]]:
    """Walk the YAML node tree: sensitive mapping keys with a live value, and credentials in
    scalar values after YAML's unescaping and unfolding (which the line pass cannot see)."""
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and str(key.value).lower() in SENSITIVE_HEADERS:
                    values = value.value if isinstance(value, yaml.SequenceNode) else [value]
                    for item in values:
                        if isinstance(item, yaml.ScalarNode) and item.value.strip() not in ("", REDACTED, "null"):
                            yield item.start_mark.line + 1, f"{key.value} header", item.value
                stack.extend((key, value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.ScalarNode):
            yield from _scan_scalar(node, text)


def _scan_scalar(node: yaml.ScalarNode, text: str) -> Iterator[tuple[int, str, str]]:
    value = str(node.value)
    if node.tag.endswith(":binary"):
        try:
            value = base64.b64decode(value).decode("latin-1")
        except (binascii.Error, ValueError):
            return
    start, end = node.start_mark.index, node.end_mark.index
    for kind, match in find_secrets(value):
        # Point at the line holding the secret when it appears verbatim in the source;
        # else (escaped, folded, base64) at the scalar's first line.
        at = text.find(match.group(0), start, end)
        line = text.count("\n", 0, at) + 1 if at >= 0 else node.start_mark.line + 1
        yield line, kind, match.group(0)


def check(path: str | os.PathLike[str], out: TextIO | None = None) -> int:
    """``mockserver cassettes check DIR``: print each finding as ``file:line: kind: excerpt``;
    exit status 1 if any, 2 if ``path`` does not exist, else 0."""
    stream = out if out is not None else sys.stdout
    if not Path(path).exists():
        print(f"mockserver: no such file or directory: {path}", file=sys.stderr)
        return 2
    findings = scan(path)
    for finding in findings:
        print(finding, file=stream)
    if findings:
        print(f"{len(findings)} secret(s) found; redact them or re-record the cassettes.", file=stream)
        return 1
    print(f"no secrets found under {path}", file=stream)
    return 0
