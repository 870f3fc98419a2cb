"""The journal keeps a bounded copy of each body, and judges retries in one pass.

* A big body (1 MB) is kept as a summary — its top-level scalars, its size and SHA-256 — not
  whole; a small one is kept whole; one nested deeper than ``BODY_DEPTH`` is summarised, so
  ``to_json()``, ``asdict`` and JSON encoding never recurse into it.
* Identical requests share the digest (of the raw bytes when the injector passes them), so
  verdicts still find retries of a big body.
* :func:`verdicts` gives what the old all-pairs comparison gave (each offender once), on
  random sessions, and 10,000 entries are judged in one pass.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import time
from dataclasses import asdict
from typing import Any

import pytest

from mockserver.faults.journal import BODY_DEPTH, BODY_KEPT, RETRYABLE, Entry, Journal, verdicts


def _open(journal: Journal, body: Any, raw: bytes | None = None, at: float = 0.0) -> Entry:
    # the injector's call, keyword for keyword (raw= is the optional addition)
    extra = {} if raw is None else {"raw": raw}
    return journal.open(
        time=at, method="POST", path="/v1/chat/completions", session="s", retry_attempt=0, body=body, **extra
    )


def _big_body() -> tuple[dict[str, Any], bytes]:
    body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "x" * 1_000_000}]}
    return body, json.dumps(body).encode()


def test_a_big_body_is_kept_as_a_summary_with_size_and_digest() -> None:
    body, raw = _big_body()
    for given in (raw, None):
        entry = _open(Journal(), body, given)
        assert entry.body_truncated
        assert entry.body == {"model": "gpt-4o-mini", "stream": True}  # the top-level scalars
        assert entry.body_bytes >= 1_000_000
        if given is not None:
            assert entry.body_sha256 == hashlib.sha256(raw).hexdigest() and entry.body_bytes == len(raw)
        assert len(json.dumps(entry.to_json())) < 1_000  # not 1 MB per entry


def test_a_small_body_is_kept_whole() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    raw = json.dumps(body).encode()
    entry = _open(Journal(), body, raw)
    assert entry.body == body and not entry.body_truncated
    assert entry.body_bytes == len(raw) and entry.body_sha256 == hashlib.sha256(raw).hexdigest()
    assert Entry(**entry.to_json()) == entry  # what mockserver.calls rebuilds from the admin API
    edge = {"model": "m", "input": "y" * (BODY_KEPT - 40)}
    assert not _open(Journal(), edge, json.dumps(edge).encode()).body_truncated


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": [value]} if depth < 10_000 else [value]
    return value


def test_deep_bodies_never_break_to_json_or_asdict() -> None:
    for depth in (BODY_DEPTH // 2 - 1, 486, 100_000):
        body = {"model": "m", "input": _nested(depth)}
        for raw in (None, b'{"model":"m","input":...}'):
            entry = _open(Journal(), body, raw)
            assert entry.body_truncated is (2 * depth + 2 > BODY_DEPTH)
            assert entry.body_sha256 is not None
            json.dumps(entry.to_json())
            asdict(entry)


def test_no_body_keeps_nothing() -> None:
    entry = _open(Journal(), None, b"")
    assert (entry.body, entry.body_bytes, entry.body_sha256, entry.body_truncated) == (None, 0, None, False)
    assert _open(Journal(), None).body_sha256 is None


def test_retries_of_a_big_body_are_still_recognised() -> None:
    body, raw = _big_body()
    journal = Journal()
    first = _open(journal, body, raw, at=0.0)
    first.status, first.retry_after = 429, 2.0
    _open(journal, body, raw, at=0.5)  # too early
    other = dict(body, model="other")
    _open(journal, other, json.dumps(other).encode(), at=0.6)  # another request: not a retry
    judged = verdicts(journal.entries())
    assert judged["offending_entries"]["ignored_retry_after"] == [2]


def test_bodies_that_do_not_parse_are_told_apart_by_their_bytes() -> None:
    journal = Journal()
    one = _open(journal, None, b"--boundary\r\nfile one")
    one.status = 400
    _open(journal, None, b"--boundary\r\nfile two")  # another upload, not a retry of the 400
    assert verdicts(journal.entries())["no_retry_of_non_retryable_4xx"]


# ---- verdicts: the same answers as the old all-pairs comparison --------------------------------


def _old_verdicts(entries: list[Entry]) -> dict[str, Any]:
    """The quadratic original (bodies compared by equality), for reference, with one rule
    added since: a retry that waited out the positive ``retry-after`` its previous attempt
    advertised backed off."""
    ignored, no_backoff, retried = [], [], []
    for earlier, later in itertools.combinations(entries, 2):
        if (later.method, later.path, later.body) != (earlier.method, earlier.path, earlier.body):
            continue
        if earlier.status is None or earlier.status < 400:
            continue
        gap = later.time - earlier.time - (earlier.duration or 0.0)
        if earlier.retry_after is not None and gap + 1e-3 < earlier.retry_after:
            ignored.append(later.id)
        if 400 <= earlier.status < 500 and earlier.status not in RETRYABLE:
            retried.append(later.id)

    def sent_before(entry: Entry) -> float:
        for candidate in reversed(entries[: entries.index(entry)]):
            if (candidate.method, candidate.path, candidate.body) == (entry.method, entry.path, entry.body):
                return candidate.time
        return entry.time

    attempts = [e for e in entries if e.retry_attempt > 0]
    for previous, current in itertools.pairwise(attempts):
        if (
            previous.status is not None
            and previous.status >= 400
            and previous.retry_after
            and current.time - previous.time - (previous.duration or 0.0) + 1e-3 >= previous.retry_after
        ):
            continue
        if current.retry_attempt == previous.retry_attempt + 1 and (
            current.time - previous.time < previous.time - sent_before(previous) - 1e-3
        ):
            no_backoff.append(current.id)
    return {"ignored_retry_after": ignored, "no_backoff": no_backoff, "retried_non_retryable_4xx": retried}


def _session(rng: random.Random, n: int) -> list[Entry]:
    entries, at = [], 0.0
    for i in range(1, n + 1):
        at += rng.choice((0.05, 0.3, 1.0, 2.5))
        status = rng.choice((None, 200, 200, 400, 404, 429, 429, 500, 503))
        retry_after = rng.choice((None, 0.5, 2.0)) if status is not None and status >= 400 else None
        body = {"n": rng.randrange(3)}
        entries.append(
            Entry(i, at, "POST", rng.choice(("/v1/a", "/v1/b")), "s", rng.randrange(3), body, status=status,
                  retry_after=retry_after, duration=rng.choice((None, 0.1)))
        )  # fmt: skip
    return entries


def test_verdicts_agree_with_the_all_pairs_comparison() -> None:
    rng = random.Random(16)
    for _ in range(300):
        entries = _session(rng, rng.randrange(1, 30))
        new, old = verdicts(entries), _old_verdicts(entries)
        for kind, offenders in old.items():
            once = list(dict.fromkeys(offenders))  # the old one listed an entry once per earlier error
            assert sorted(new["offending_entries"][kind]) == sorted(once), kind
        assert new["requests"] == len(entries)
        assert new["honoured_retry_after"] is not old["ignored_retry_after"]


def test_ten_thousand_identical_entries_are_judged_in_one_pass() -> None:
    journal = Journal(10_000)
    body = {"model": "m", "messages": [{"role": "user", "content": "again"}]}
    raw = json.dumps(body).encode()
    for i in range(10_000):
        entry = _open(journal, body, raw, at=i * 0.001)
        entry.status, entry.retry_after = 429, 1.0
    start = time.perf_counter()
    judged = verdicts(journal.entries())
    took = time.perf_counter() - start
    assert judged["requests"] == 10_000 and len(judged["offending_entries"]["ignored_retry_after"]) == 9_999
    print(f"verdicts on 10,000 identical entries: {took * 1000:.1f} ms")  # (the pairwise way took ~13 s)


def test_kept_bytes_stay_within_the_budget_oldest_going_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past JOURNAL_BYTES of kept bodies the oldest entries go, whatever the journal's size;
    a clear gives the budget back."""
    from mockserver.faults import journal as module

    monkeypatch.setattr(module, "JOURNAL_BYTES", 10_000)
    kept = Journal(size=1_000)
    raw = b'{"pad": "' + b"x" * 990 + b'"}'  # 1,001 bytes, kept as bytes
    for n in range(50):
        kept.open(time=float(n), method="POST", path="/v1/chat/completions", session=None, retry_attempt=0, raw=raw)
    entries = kept.entries()
    assert len(entries) == 9 and [e.time for e in entries] == [float(n) for n in range(41, 50)]
    assert entries[-1].body == {"pad": "x" * 990} and entries[-1].body_bytes == len(raw)
    kept.clear()
    assert kept.entries() == [] and kept._bytes == 0
