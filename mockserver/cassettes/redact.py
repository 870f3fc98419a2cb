"""Secrets never land in a cassette: redaction on write and on load, and a scan for CI.

A recording proxies real traffic, so the caller's ``Authorization`` header, an API key
pasted into a prompt, a token a provider echoes back or a ``?api_key=`` query parameter would
otherwise be written to a file that gets committed. Three layers keep them out:

* **header names**: a header in :data:`SENSITIVE_HEADERS`, or whose name looks like a
  credential's (it contains ``token``, ``secret``, ``password``/``passwd``, ``api-key``,
  ``auth``, ``session``, ``cookie``, ``credential``… — ``X-Custom-Token``,
  ``X-Amz-Security-Token``; see :func:`sensitive_header`), keeps its name (the cassette still
  shows that one was sent) and loses its value. Query parameters and form fields with such a
  name lose their value too (:func:`secret_parameter`), and so do JSON string fields named
  like one (``"password"``, ``"client_secret"``, an echoed ``"X-Custom-Token"``).
* **value patterns**, wherever a value appears (headers, URIs, query strings, request and
  response bodies — JSON, form or text — and so every echo of a request): OpenAI and
  Anthropic ``sk-…`` keys, bearer tokens, JWTs, AWS access key ids and (next to a
  ``secret``/``aws`` name) secret access keys, GitHub, Slack (tokens and webhook URLs),
  Google, Stripe and Fireworks keys, URL passwords (``scheme://user:password@host`` keeps
  ``user``), PEM private keys, ``Basic`` credentials after an ``Authorization`` name and
  credential-named query parameters. Each is cut down to a prefix that tells a reader what was
  there, then ``REDACTED``. Percent-encoded runs (form and query values, a URL inside a
  prompt) are also read decoded, and a stream's text fields joined across its events
  (:func:`redact_events`). More patterns: :func:`add_pattern` (``mockserver cassettes check
  --pattern REGEX`` on the command line).
* :func:`scan` reads files as text (and as YAML when they parse, so a value the dumper
  folded across lines, escaped or stored as ``!!binary`` is still seen) and reports every
  credential still present, with file and line; ``mockserver cassettes check DIR`` fails CI on
  any finding. A finding is exactly what redaction would change, so a cassette written by
  anyone (vcrpy included) that checks clean loads unchanged, and every cassette mockserver
  writes checks clean.

Redaction is idempotent: a match that touches a ``REDACTED`` already there is left alone, so
redacting twice changes nothing and what redaction leaves scans clean. Bytes that are not
UTF-8 are carried through unchanged. This module depends on nothing else in mockserver.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import json
import os
import re
import sys
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO
from urllib.parse import quote_plus, unquote_plus

import yaml

__all__ = [
    "REDACTED",
    "SENSITIVE_HEADERS",
    "Finding",
    "Secret",
    "add_pattern",
    "added_patterns",
    "check",
    "clear_patterns",
    "find_secrets",
    "header_secrets",
    "redact_bytes",
    "redact_events",
    "redact_headers",
    "redact_text",
    "redact_uri",
    "scan",
    "scrubbing",
    "secret_parameter",
    "sensitive_header",
]

REDACTED = "REDACTED"

# Lower-case names, redacted whatever their value. openai-organization/-project identify the
# account and come back in responses too; cookies carry sessions. Names that merely look like
# a credential's are caught by :func:`sensitive_header`.
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

# The words that make a header, query parameter or form field name a credential's. Not
# ``tokens`` (``x-ratelimit-remaining-tokens``, ``max_tokens``), ``tokenizer``, pagination
# cursors (``page_token``, ``nextToken``), ``author`` or ``www-authenticate`` (a challenge).
_CREDENTIAL_WORDS = (
    r"(?<!page)(?<!page[_-])(?<!next)(?<!next[_-])(?<!continuation)(?<!continuation[_-])token(?!s|iz)"
    r"|secret|passw(?:or)?d|pwd|api[_-]?key|access[_-]?key|private[_-]?key|subscription[_-]?key"
    r"|auth(?!or(?!i)|enticat)|session|cookie|credential|signature"
)
_CREDENTIAL_HEADER = re.compile(rf"(?i:{_CREDENTIAL_WORDS})")
# Response headers whose names contain such a word but hold no secret, and replay as recorded.
_NOT_CREDENTIAL_HEADER = re.compile(r"(?i)^access-control-|rate-?limit")
# Query parameter / form field names: any name holding a credential word, or a bare key/sig.
_PARAMETER_NAME = rf"(?i:[A-Za-z0-9_.-]*?(?:{_CREDENTIAL_WORDS})[A-Za-z0-9_.-]*|key|sig)"
_PARAMETER = re.compile(_PARAMETER_NAME)
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.-]*")
# Inside the value patterns below, a name's runs around its credential word are bounded
# (``_RUN``): ``re`` backtracks, and an unbounded ``[…]*word[…]*`` tried on a long run of the
# word (``awsaws…``, ``secret-secret-…``) costs the square of the run — 24 KB of it held the
# event loop ~20 s. Bounded, each start costs a constant and a body costs time linear in its
# size; the price is that a credential word more than ``_RUN`` characters inside a name is not
# seen by those patterns (header, parameter and field names are still judged whole by name).
_RUN = "{0,64}"
_NAME = "[A-Za-z0-9_.-]" + _RUN
_PARAMETER_RUN = rf"(?i:{_NAME}?(?:{_CREDENTIAL_WORDS}){_NAME}|key|sig)"


def sensitive_header(name: str) -> bool:
    """Is ``name`` a header whose value :func:`redact_headers` removes whole?"""
    lowered = name.lower()
    if lowered in SENSITIVE_HEADERS:
        return True
    return _CREDENTIAL_HEADER.search(lowered) is not None and _NOT_CREDENTIAL_HEADER.search(lowered) is None


def secret_parameter(name: str) -> bool:
    """Is query parameter (or form field) ``name`` one whose value :func:`redact_uri` removes?
    (``_PARAMETER``'s meaning, told in linear time: its full match backtracks quadratically on a
    long name of credential words that ends in a character no name has, ``tokentoken…!``.)"""
    if name.lower() in ("key", "sig"):
        return True
    return _NAME_CHARS.fullmatch(name) is not None and _CREDENTIAL_HEADER.search(name) is not None


@dataclass(frozen=True, slots=True)
class _Rule:
    """One value pattern. The text up to the end of group 1 (when the pattern has one) is
    kept — a prefix telling a reader what was there — and the rest of the match becomes
    ``REDACTED``. ``literals``: one of them is in every match (tested before the regex, which
    gets no prefix scan from ``re`` when it opens with a lookbehind); empty: always tried."""

    kind: str
    literals: tuple[str, ...]
    regex: re.Pattern[str]
    blits: tuple[bytes, ...]

    @classmethod
    def of(cls, kind: str, literals: tuple[str, ...], regex: re.Pattern[str]) -> _Rule:
        return cls(kind, literals, regex, tuple(literal.encode() for literal in literals))

    def tried_on(self, text: str) -> bool:
        return not self.literals or any(literal in text for literal in self.literals)

    def tried_on_bytes(self, data: bytes) -> bool:
        return not self.blits or any(literal in data for literal in self.blits)

    def spans(self, text: str) -> Iterator[tuple[int, int, re.Match[str]]]:
        """(start, end, match) of each secret part, skipping those already redacted."""
        grouped = self.regex.groups > 0
        for match in self.regex.finditer(text):
            start = match.end(1) if grouped and match.start(1) >= 0 else match.start()
            end = match.end()
            if start < end and not _touches_marker(text, start, end):
                yield start, end, match


def _touches_marker(text: str, start: int, end: int) -> bool:
    """Does ``text[start:end]`` overlap a ``REDACTED`` already there?"""
    at = text.find(REDACTED, max(0, start - len(REDACTED) + 1), end + len(REDACTED) - 1)
    return 0 <= at < end


_A = re.ASCII
_SEP = r"(?:\\{0,3}[\"'])?[ \t]*[:=][ \t]*(?:\\{0,3}[\"'])?"  # name and value: JSON, YAML, env, query
# JSON field names that hold a credential: snake/camel names ending in a credential word, and
# header names as an echo of request headers spells them (``X-Custom-Token``, ``Cookie``):
# hyphenated, or one of the well-known ones. Not a bare ``token`` (logprobs entries have one).
_JSON_NAME = (
    r"(?!(?i:access-control-|" + _NAME + r"rate-?limit))(?:" + _NAME + r"(?i:passw(?:or)?d|secret"
    r"|(?:api|secret|private|access)[_-]?key|(?:access|refresh|auth|id|bearer|session)[_-]?token|credentials?)"
    r"|[A-Za-z0-9_.]"
    + _RUN
    + "-"
    + _NAME
    + r"?(?i:"
    + _CREDENTIAL_WORDS
    + r")"
    + _NAME
    + r"|(?i:authorization|cookie|openai-organization|openai-project))"
)
_PEM_BODY = r"(?:(?!-----END)(?:[A-Za-z0-9+/=\s:,.-]|\\{1,3}[rnt]))+"  # newlines escaped once per JSON level
_BUILTIN: tuple[_Rule, ...] = tuple(
    _Rule.of(kind, literals, re.compile(pattern, flags))
    for kind, literals, pattern, flags in (
        # Multi-line first: its body would otherwise be cut up by the patterns below.
        (
            "private key",
            ("PRIVATE KEY",),
            r"(-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----)(?!(?:\\{1,3}[rn]|\s)*REDACTED)" + _PEM_BODY,
            _A,
        ),
        (
            "URL password",
            ("://", ":\\/\\/"),
            # A scheme starts where no scheme character precedes it, and is short: a long run of
            # letters before a "://" is tried once, not from each of its letters (quadratic).
            r"((?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}:(?:\\?/){2}[^\s:/?#@\"'<>\\]*:)"
            r"(?!REDACTED@)[^\s/?#@\"'<>\\]+(?=@)",
            _A,
        ),
        # OpenAI (sk-…, sk-proj-…), Anthropic (sk-ant-…), OpenRouter.
        ("sk- key", ("sk-",), r"(?<![A-Za-z0-9_-])(sk-)(?!REDACTED)[A-Za-z0-9_-]{20,}", _A),
        # A digit and 16+ characters, so prose such as "Bearer authentication" is left alone.
        (
            "bearer token",
            ("bearer", "Bearer", "BEARER"),
            r"((?i:bearer)\s+)(?!REDACTED)(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{16,}",
            _A,
        ),
        ("JWT", ("eyJ",), r"(?<![A-Za-z0-9_-])(eyJ)(?!REDACTED)[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*", _A),
        (
            "AWS access key id",
            ("AKIA", "ASIA", "ABIA", "ACCA"),
            r"(?<![A-Za-z0-9])(A(?:KIA|SIA|BIA|CCA))(?!REDACTED)[A-Z0-9]{16}(?![A-Za-z0-9])",
            _A,
        ),
        # 40 base64 characters are only a secret next to a name that says so
        # (aws_secret_access_key, AWS_SECRET_ACCESS_KEY, SecretAccessKey, x-aws-secret…).
        (
            "AWS secret access key",
            ("secret", "Secret", "SECRET", "aws", "Aws", "AWS"),
            r"((?<![A-Za-z0-9_.-])" + _NAME + r"(?i:secret|aws)" + _NAME + _SEP + r")"
            r"(?!REDACTED)(?:[A-Za-z0-9/+]|%2[BbFf]|\\/){40}(?![A-Za-z0-9/+%=])",  # '\/': JSON may escape '/'
            _A,
        ),
        (
            "GitHub token",
            ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
            r"(?<![A-Za-z0-9_])(gh[pousr]_|github_pat_)(?!REDACTED)[A-Za-z0-9_]{20,}",
            _A,
        ),
        ("Slack token", ("xox",), r"(?<![A-Za-z0-9_-])(xox[abeoprs]-)(?!REDACTED)[A-Za-z0-9-]{10,}", _A),
        (
            "Slack webhook",
            ("hooks.slack.com",),
            r"(hooks\.slack\.com\\?/(?:services|workflows|triggers)\\?/)(?!REDACTED)(?:[A-Za-z0-9_-]|\\?/){8,}",
            _A,
        ),
        ("Google API key", ("AIza",), r"(?<![A-Za-z0-9_])(AIza)(?!REDACTED)[0-9A-Za-z_-]{35}", _A),
        ("Google OAuth token", ("ya29.",), r"(?<![A-Za-z0-9_])(ya29\.)(?!REDACTED)[0-9A-Za-z_-]{20,}", _A),
        (
            "Stripe key",
            ("_live_", "_test_", "whsec_"),
            r"(?<![A-Za-z0-9_])((?:sk|rk)_(?:live|test)_|pk_live_|whsec_)(?!REDACTED)[A-Za-z0-9]{16,}",
            _A,
        ),
        ("fireworks key", ("fw_",), r"(?<![A-Za-z0-9_])(fw_)(?!REDACTED)[A-Za-z0-9]{20,}", _A),
        # Basic credentials are only told from prose by the header name before them.
        (
            "basic credentials",
            ("uthorization", "UTHORIZATION"),
            r"((?i:authorization)" + _SEP + r"(?i:basic)[ \t]+)(?!REDACTED)[A-Za-z0-9+/]{6,}={0,2}",
            _A,
        ),
        # A JSON string field with a credential's name (see _JSON_NAME), written plain or
        # escaped inside another string (tool arguments, an echoed body). Names that only
        # start with a credential word (``secret_word``) and non-string values (a JSON
        # schema's ``"password": {...}``) are left alone.
        (
            "secret JSON field",
            ('":',),
            r'((?<![A-Za-z0-9_.-])\\{0,3}"' + _JSON_NAME + r'\\{0,3}"[ \t]*:[ \t]*\\{0,3}")'
            r'(?!REDACTED)[^"\\\r\n]+(?=\\{0,3}")',
            _A,
        ),
        # Needs a ``?``/``&`` and 6+ characters, so code such as ``api_key=os.environ[...]`` in a
        # recorded answer is left alone (a whole form body and a URI's query go by name alone).
        (
            "secret query parameter",
            ("=",),
            r"([?&]" + _PARAMETER_RUN + r"=)(?!REDACTED)[^&#\s\"'<>\\]{6,}",
            _A,
        ),
    )
)
_custom: tuple[_Rule, ...] = ()


def add_pattern(regex: str | re.Pattern[str], kind: str = "custom pattern") -> None:
    """Redact (and :func:`scan` for) what ``regex`` matches too, from now on in this process.

    The whole match becomes ``REDACTED`` — unless the pattern has a capturing group: then the
    text up to the end of group 1 is kept, as the built-in patterns keep ``sk-`` or
    ``aws_secret_access_key=``. A match touching a ``REDACTED`` already there is skipped, so
    redaction stays idempotent whatever the pattern. ``ValueError`` for a regex that does not
    compile or matches the empty string.
    """
    global _custom
    try:
        compiled = re.compile(regex) if isinstance(regex, str) else regex
    except re.error as exc:
        raise ValueError(f"invalid pattern {regex!r}: {exc}") from None
    if compiled.search("") is not None:
        raise ValueError(f"pattern {compiled.pattern!r} matches the empty string")
    _custom = (*_custom, _Rule.of(kind, (), compiled))


def clear_patterns() -> None:
    """Forget every pattern :func:`add_pattern` added."""
    global _custom
    _custom = ()


@contextmanager
def added_patterns(*regexes: str | re.Pattern[str], kind: str = "custom pattern") -> Iterator[None]:
    """:func:`add_pattern` for each of ``regexes`` inside the block only (a test, one run of
    ``cassettes check``); the patterns added before it are kept."""
    global _custom
    before = _custom
    try:
        for regex in regexes:
            add_pattern(regex, kind)
        yield
    finally:
        _custom = before


# The values of this interaction's credential headers (see :func:`scrubbing`), as literal
# rules: a context variable, so concurrent recordings (threads, tasks) never see each other's.
_seen: ContextVar[tuple[_Rule, ...]] = ContextVar("mockserver_redact_seen", default=())
# Shorter values are not looked for elsewhere: ``x-session: 1`` must not turn every ``1`` of a
# body into ``REDACTED``.
MIN_SEEN = 8


def header_secrets(headers: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """The values :func:`redact_headers` removes by name (``X-Custom-Token: tok_live_…``), as
    they may appear elsewhere: the whole value, a scheme's credential (``Bearer X`` → ``X``)
    and each cookie's value. Only those of :data:`MIN_SEEN` characters or more."""
    found: list[str] = []
    for name, value in headers:
        if not sensitive_header(name):
            continue
        value = value.strip()
        candidates = [value, value.rpartition(" ")[2]]
        if "=" in value:
            candidates += [pair.partition("=")[2].strip() for pair in value.split(";")]
        for candidate in candidates:
            if len(candidate) >= MIN_SEEN and candidate != REDACTED and candidate not in found:
                found.append(candidate)
    return tuple(sorted(found, key=len, reverse=True))  # longest first: a value inside another


@contextmanager
def scrubbing(values: Iterable[str]) -> Iterator[None]:
    """Inside the block, every redaction also replaces each of ``values`` (a secret seen once,
    by name, in a credential header of this interaction — :func:`header_secrets`) wherever it
    appears: bodies, echoes, URLs (read decoded there too), streams joined across events."""
    rules = tuple(
        _Rule.of("credential header value", (value,), re.compile(re.escape(value)))
        for value in values
        if len(value) >= MIN_SEEN
    )
    token = _seen.set(_seen.get() + rules)
    try:
        yield
    finally:
        _seen.reset(token)


def _rules() -> tuple[_Rule, ...]:
    return _BUILTIN + _custom + _seen.get()


def _replace(text: str, spans: Iterable[tuple[int, int, str]]) -> str:
    """``text`` with each (start, end, replacement) applied; spans are in order, disjoint."""
    parts: list[str] = []
    last = 0
    for start, end, replacement in spans:
        parts.append(text[last:start])
        parts.append(replacement)
        last = end
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class Secret:
    """A credential found in a text: ``prefix`` (kept by redaction, it says what was there)
    then ``value`` (what becomes ``REDACTED``), at ``start:end`` of the text searched. Found
    inside a percent-encoded run, both are the decoded text; ``start``/``end`` stay positions
    in the text as it was given."""

    kind: str
    start: int
    end: int
    prefix: str
    value: str

    @property
    def text(self) -> str:
        return self.prefix + self.value


# A stretch of text holding percent escapes (a URL or form value pasted into a prompt, a
# redirect target inside a query): its secrets are seen once it is decoded.
_ENCODED_RUN = re.compile(r"[^\s\"'<>\\]*%[0-9A-Fa-f]{2}[^\s\"'<>\\]*")


def _decoded_runs(text: str) -> Iterator[tuple[str, list[int]]]:
    """Each percent-encoded run of ``text``, decoded (ASCII escapes only, and ``+``
    as a space: credentials are ASCII), with the position in ``text`` of each decoded
    character and, last, of the run's end."""
    for run in _ENCODED_RUN.finditer(text):
        chars: list[str] = []
        where: list[int] = []
        at, end = run.start(), run.end()
        while at < end:
            char = text[at]
            code = int(text[at + 1 : at + 3], 16) if char == "%" and _HEX.fullmatch(text[at + 1 : at + 3]) else -1
            where.append(at)
            if 0x20 <= code < 0x7F or code in (0x09, 0x0A, 0x0D):
                chars.append(chr(code))
                at += 3
            else:
                chars.append(" " if char == "+" else char)
                at += 1
        where.append(end)
        yield "".join(chars), where


_HEX = re.compile(r"[0-9A-Fa-f]{2}")


def _plain_secrets(text: str) -> Iterator[Secret]:
    taken: list[tuple[int, int]] = []
    for rule in _rules():
        if rule.tried_on(text):
            for start, end, match in rule.spans(text):
                if not any(start < last and first < end for first, last in taken):
                    taken.append((start, end))
                    yield Secret(rule.kind, match.start(), end, text[match.start() : start], text[start:end])


def find_secrets(text: str) -> Iterator[Secret]:
    """Every credential-looking value in ``text`` — what :func:`redact_text` removes: a match
    inside one an earlier pattern already covers (the JWT of a bearer token) is not reported
    again, and percent-encoded runs are read decoded too."""
    found = list(_plain_secrets(text))
    yield from found
    if "%" not in text:
        return
    for decoded, where in _decoded_runs(text):
        for secret in _plain_secrets(decoded):
            start, end = where[secret.start], where[secret.end]
            if not any(start < other.end and other.start < end for other in found):
                yield replace(secret, start=start, end=end)


def redact_text(text: str) -> str:
    """``text`` with every credential-looking value replaced by its prefix + ``REDACTED``
    (inside a percent-encoded run, the encoded prefix is kept as it was)."""
    for rule in _rules():
        if rule.tried_on(text):
            text = _replace(text, ((start, end, REDACTED) for start, end, _ in rule.spans(text)))
    if "%" not in text:
        return text
    spans: list[tuple[int, int, str]] = []
    for decoded, where in _decoded_runs(text):
        for secret in _plain_secrets(decoded):
            spans.append((where[secret.start + len(secret.prefix)], where[secret.end], REDACTED))
    return _replace(text, sorted(spans))


# A body that is form-encoded through and through (``a=1&b=2``), no whitespace anywhere.
_FORM = re.compile(r"[^=&\s]+=[^&\s]*(?:&[^=&\s]*=[^&\s]*)*&?")


def _pairs(query: str) -> Iterator[tuple[int, int, str, str | None]]:
    """(start, end, replacement, kind) for the ``name=value`` pairs to redact: a
    credential-named one loses its value (kind None: the caller names it); an encoded value is
    decoded, and re-encoded redacted if it held a credential (kind: the first one's)."""
    position = 0
    for pair in query.split("&"):
        name, eq, value = pair.partition("=")
        start, end = position + len(name) + 1, position + len(pair)
        position += len(pair) + 1
        if not eq or not value or _touches_marker(query, start, end):
            continue
        if secret_parameter(unquote_plus(name)):
            yield start, end, REDACTED, None
        elif "%" in value or "+" in value:
            decoded = unquote_plus(value)
            found = next(find_secrets(decoded), None)
            if found is not None:
                yield start, end, quote_plus(redact_text(decoded), safe=""), found.kind


def _pair_spans(query: str) -> Iterator[tuple[int, int, str]]:
    return ((start, end, replacement) for start, end, replacement, _ in _pairs(query))


def _pair_findings(query: str, kind: str) -> Iterator[tuple[str, str]]:
    return ((found or kind, query[start:end]) for start, end, _, found in _pairs(query))


def _is_form(text: str) -> bool:
    return "=" in text and _FORM.fullmatch(text) is not None


def _redact_body(text: str) -> str:
    if _is_form(text):
        text = _replace(text, _pair_spans(text))
    return redact_text(text)


def redact_bytes(data: bytes) -> bytes:
    """A body (request or response, raw bytes) with every credential gone: the patterns of
    :func:`redact_text`, and for a form-encoded body its credential-named fields. Bytes that
    are not UTF-8 pass through unchanged."""
    if not any(rule.tried_on_bytes(data) for rule in _rules()) and b"=" not in data and b"%" not in data:
        return data
    text = data.decode("utf-8", "surrogateescape")
    clean = _redact_body(text)
    return data if clean == text else clean.encode("utf-8", "surrogateescape")


def redact_uri(uri: str) -> str:
    """A URI without credentials: credential-named query values (however short), and
    key-looking values anywhere (query values percent-decoded too, URL passwords included)."""
    base, question, rest = uri.partition("?")
    if question:
        query, hash_, fragment = rest.partition("#")
        uri = base + question + _replace(query, _pair_spans(query)) + hash_ + fragment
    return redact_text(uri)


def _redact_header(name: str, value: str) -> str:
    if sensitive_header(name):
        return REDACTED
    # Seen with its name, so ``x-aws-secret-key: <40 characters>`` has its context.
    prefix = f"{name}: "
    combined = redact_text(prefix + value)
    return combined[len(prefix) :] if combined.startswith(prefix) else redact_text(value)


def redact_headers(headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Headers whose name is a credential's (:func:`sensitive_header`) keep their name with
    the value ``REDACTED``; others are scrubbed of key-looking values (a custom header may
    carry one)."""
    return tuple((name, _redact_header(name, value)) for name, value in headers)


# --------------------------------------------------------------------- streamed text

# A stream sends its text a few characters per event (``choices[0].delta.content``, a
# Responses ``delta``, tool ``arguments``): a key the model or a script repeats arrives cut
# into pieces no pattern sees one event at a time. Those fields are read joined, in order,
# one text per choice / item / event type.
_DELTA_FIELDS = frozenset({"content", "text", "delta", "arguments", "refusal", "reasoning", "reasoning_content"})
# An event's fields that tell apart the texts of one stream (Responses' items and parts).
_PART_FIELDS = ("type", "item_id", "output_index", "content_index", "summary_index")
_DATA = re.compile(rb"^data: ?(\{.*?)\r?$", re.MULTILINE)

_Path = tuple[str | int, ...]


@dataclass(slots=True)
class _Piece:
    event: int
    path: _Path
    start: int  # where this piece begins in its group's joined text
    text: str


def _leaves(value: object, path: _Path, group: tuple[object, ...]) -> Iterator[tuple[tuple[object, ...], _Path, str]]:
    """(group, path, text) of each delta-like string under ``value``; a list item with an
    ``index`` (a choice, a tool call) is grouped by it, not by where it sits in the list."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                if key in _DELTA_FIELDS:
                    yield (*group, key), (*path, key), item
            else:
                yield from _leaves(item, (*path, key), (*group, key))
    elif isinstance(value, list):
        for position, item in enumerate(value):
            index = item.get("index", position) if isinstance(item, dict) else position
            yield from _leaves(item, (*path, position), (*group, f"#{index}"))


def _stream_pieces(events: Sequence[bytes]) -> tuple[dict[tuple[object, ...], list[_Piece]], list[object]]:
    """The delta-like strings of ``events`` by group, and each event's parsed ``data:``
    JSON (None when it has none)."""
    groups: dict[tuple[object, ...], list[_Piece]] = {}
    parsed: list[object] = []
    for number, event in enumerate(events):
        match = _DATA.search(event)
        try:
            data = json.loads(match.group(1)) if match is not None else None
        except ValueError:
            data = None
        parsed.append(data)
        if not isinstance(data, dict):
            continue
        part = tuple(data.get(name) for name in _PART_FIELDS)
        for group, path, text in _leaves(data, (), part):
            pieces = groups.setdefault(group, [])
            start = pieces[-1].start + len(pieces[-1].text) if pieces else 0
            pieces.append(_Piece(number, path, start, text))
    return groups, parsed


def _stream_secrets(events: Sequence[bytes]) -> Iterator[tuple[Secret, list[_Piece]]]:
    """Each secret that only the joined text of a stream shows (one that sits whole in one
    piece is left to the per-event pass), with the pieces of its group."""
    groups, _ = _stream_pieces(events)
    for pieces in groups.values():
        if len(pieces) < 2:
            continue
        joined = "".join(piece.text for piece in pieces)
        for secret in find_secrets(joined):
            if not any(p.start <= secret.start and secret.end <= p.start + len(p.text) for p in pieces):
                yield secret, pieces


def redact_events(events: Sequence[bytes]) -> list[bytes]:
    """A stream's events with every secret gone, those cut across events included: the
    piece where a secret's value begins says ``REDACTED`` there, the later pieces lose their
    part of it. An event that changes is written again as compact JSON; the others, and every
    event then, go through :func:`redact_bytes`."""
    cuts: dict[int, list[tuple[_Piece, int, int, bool]]] = {}  # event → (piece, from, to, mark)
    for secret, pieces in _stream_secrets(events):
        value_start = secret.start + len(secret.prefix)
        for piece in pieces:
            start = max(value_start, piece.start) - piece.start
            end = min(secret.end, piece.start + len(piece.text)) - piece.start
            if start < end:
                cuts.setdefault(piece.event, []).append((piece, start, end, piece.start <= value_start))
    out = list(events)
    if cuts:
        _, parsed = _stream_pieces(events)
        for number, changes in cuts.items():
            data = parsed[number]
            for piece, start, end, mark in sorted(changes, key=lambda c: -c[1]):  # right to left
                text = piece.text = piece.text[:start] + (REDACTED if mark else "") + piece.text[end:]
                _set(data, piece.path, text)
            encoded = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
            match = _DATA.search(events[number])
            assert match is not None  # a piece came from this event's data line
            out[number] = events[number][: match.start(1)] + encoded + events[number][match.end(1) :]
    return [redact_bytes(event) for event in out]


def _set(data: object, path: _Path, text: str) -> None:
    for step in path[:-1]:
        data = data[step]  # type: ignore[index]
    data[path[-1]] = text  # type: ignore[index]


# ----------------------------------------------------------------------------- the scan


@dataclass(frozen=True, slots=True)
class Finding:
    """A credential left in a file. ``excerpt`` is masked: CI logs must not leak it again."""

    path: Path
    line: int  # 1-based
    kind: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}: {self.excerpt}"


def _mask(prefix: str, secret: str) -> str:
    """What a finding shows: the prefix redaction keeps (``sk-``, ``aws_secret_access_key=``;
    its last 40 characters at most), the secret's length, and of a secret of 20 characters or
    more its first 4 (``sk-proj…``: enough to tell which key, a tenth of it at most)."""
    prefix = " ".join(prefix.split())[-40:]
    secret = secret.strip()
    shown = secret[:4] if len(secret) >= 20 else ""
    return f"{prefix}{shown}… ({len(secret)} chars)"


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


_EMPTY = ("", REDACTED, "null", "~")
# ``name: value`` / ``"name": ["value"]`` on one line, or ``name:`` and ``- value`` on the next.
_HEADER_LINE = re.compile(r"""^\s*(?:-\s+)?["']?([A-Za-z0-9_-]+)["']?\s*:\s*(.*?)\s*,?\s*$""")
_LIST_ITEM = re.compile(r"^\s*-\s+(.*?)\s*$")


def _scan_file(path: Path) -> list[Finding]:
    text = path.read_bytes().decode("utf-8", errors="replace")
    seen: set[tuple[int, str, str]] = set()
    found: list[Finding] = []

    def add(line: int, kind: str, prefix: str, secret: str) -> None:
        if (line, kind, secret) not in seen:
            seen.add((line, kind, secret))
            found.append(Finding(path, line, kind, _mask(prefix, secret)))

    # Two passes: the text as it stands (comments, and files that are not YAML), then the
    # YAML node tree, which sees values unescaped, unfolded and decoded. Inside a value the
    # tree is the authority: the text pass would see a secret again, or half of one.
    loose = list(find_secrets(text))
    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError, ValueError):
        for secret in loose:
            add(text.count("\n", 0, secret.start) + 1, secret.kind, secret.prefix, secret.value)
        # A cassette cut short is also read for credential-named headers, line by line.
        if "interactions" in text:
            for number, kind, value in _scan_header_lines(text):
                add(number, kind, "", value)
        return found
    covered: list[tuple[int, int]] = []
    tree = list(_scan_node(node, text, covered)) if node is not None else []
    for secret in loose:
        if not any(start <= secret.start < end for start, end in covered):
            add(text.count("\n", 0, secret.start) + 1, secret.kind, secret.prefix, secret.value)
    for number, kind, prefix, value in tree:
        add(number, kind, prefix, value)
    return found


def _unquoted(value: str) -> str:
    return value.strip().strip("[]").strip().strip("'\"")


def _scan_header_lines(text: str) -> Iterator[tuple[int, str, str]]:
    lines = text.split("\n")
    for index, line in enumerate(lines):
        header = _HEADER_LINE.match(line)
        if header is None or not sensitive_header(header.group(1)):
            continue
        value, number = _unquoted(header.group(2)), index + 1
        if not value and index + 1 < len(lines) and (item := _LIST_ITEM.match(lines[index + 1])):
            value, number = _unquoted(item.group(1)), index + 2
        if value not in _EMPTY and not value.startswith("{"):
            yield number, f"{header.group(1)} header", value


def _line(node: yaml.Node, text: str, secret: str) -> int:
    """The line holding ``secret`` when it appears verbatim in ``node``'s source; else
    (escaped, folded, base64) the node's first line."""
    at = text.find(secret, node.start_mark.index, node.end_mark.index)
    return text.count("\n", 0, at) + 1 if at >= 0 else node.start_mark.line + 1


# What the YAML pass reports: line, kind, the prefix redaction keeps, and the secret.
_Found = tuple[int, str, str, str]


def _scan_node(root: yaml.Node, text: str, covered: list[tuple[int, int]]) -> Iterator[_Found]:
    """Walk the YAML node tree as redaction sees a cassette: ``headers`` by name and value,
    ``uri`` as a URI, ``body`` (and ``body.string``) as a body, any other scalar as text —
    after YAML's unescaping and unfolding, which the text pass cannot see through. The source
    spans it read are added to ``covered``."""
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    while stack:
        node, role = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = str(key.value) if isinstance(key, yaml.ScalarNode) else ""
                if name == "headers" and isinstance(value, yaml.MappingNode):
                    covered.append((value.start_mark.index, value.end_mark.index))
                    yield from _scan_headers(value, text)
                    continue
                if name.lower() in SENSITIVE_HEADERS:
                    for item in value.value if isinstance(value, yaml.SequenceNode) else [value]:
                        if isinstance(item, yaml.ScalarNode) and item.value.strip() not in _EMPTY:
                            yield item.start_mark.line + 1, f"{name} header", "", item.value
                child = name if name in ("uri", "body") else ("body" if role == "body" and name == "string" else "")
                stack.extend(((key, ""), (value, child)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, "") for item in node.value)
        elif isinstance(node, yaml.ScalarNode):
            covered.append((node.start_mark.index, node.end_mark.index))
            yield from _scan_scalar(node, text, role)


def _scan_headers(mapping: yaml.MappingNode, text: str) -> Iterator[_Found]:
    for key, value in mapping.value:
        if not isinstance(key, yaml.ScalarNode):
            continue
        name = str(key.value)
        for item in value.value if isinstance(value, yaml.SequenceNode) else [value]:
            if not isinstance(item, yaml.ScalarNode):
                continue
            if sensitive_header(name):
                if item.value.strip() not in _EMPTY:
                    yield item.start_mark.line + 1, f"{name} header", "", item.value
                continue
            for secret in find_secrets(f"{name}: {item.value}"):
                yield _line(item, text, secret.text), secret.kind, secret.prefix, secret.value


def _scalar_text(node: yaml.ScalarNode) -> str | None:
    value = str(node.value)
    if not node.tag.endswith(":binary"):
        return value
    try:
        raw = base64.b64decode(value)
    except (binascii.Error, ValueError):
        return None
    if raw[:2] == b"\x1f\x8b":  # a gzipped body vcrpy kept as sent: read what it says
        with suppress(OSError, EOFError, zlib.error):
            raw = gzip.GzipFile(fileobj=io.BytesIO(raw)).read(64 << 20)
    return raw.decode("utf-8", errors="replace")


def _scan_scalar(node: yaml.ScalarNode, text: str, role: str) -> Iterator[_Found]:
    value = _scalar_text(node)
    if value is None:
        return
    if role == "uri" and "?" in value:
        query = value.partition("?")[2].partition("#")[0]
        for kind, found in _pair_findings(query, "secret query parameter"):
            yield _line(node, text, found), kind, "", found
    elif role == "body" and _is_form(value):
        for kind, found in _pair_findings(value, "secret form field"):
            yield _line(node, text, found), kind, "", found
    for secret in find_secrets(value):
        yield _line(node, text, secret.text), secret.kind, secret.prefix, secret.value
    if role == "body" and "data:" in value:
        events = [event.encode() for event in re.split(r"(?<=\n\n)", value) if event]
        for secret, _ in _stream_secrets(events):
            yield node.start_mark.line + 1, f"{secret.kind} (streamed in pieces)", secret.prefix, secret.value


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
