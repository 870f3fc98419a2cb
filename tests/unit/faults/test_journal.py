"""The journal's verdicts on a client's retries, from hand-made entries (no server)."""

from __future__ import annotations

import pytest

from mockserver.faults.journal import Entry, verdicts


def _entry(n: int, at: float, status: int, retry_after: float | None = None, attempt: int = 0) -> Entry:
    return Entry(n, at, "POST", "/v1/chat/completions", "s", attempt, {"x": 1}, status=status, retry_after=retry_after)


def test_verdicts_flag_ignored_retry_after_and_retried_400s() -> None:
    good = verdicts([_entry(1, 0.0, 429, retry_after=1.0), _entry(2, 1.2, 200, attempt=1)])
    assert good["honoured_retry_after"] and good["no_retry_of_non_retryable_4xx"]
    early = verdicts([_entry(1, 0.0, 429, retry_after=1.0), _entry(2, 0.3, 200, attempt=1)])
    assert not early["honoured_retry_after"] and early["offending_entries"]["ignored_retry_after"] == [2]
    silly = verdicts([_entry(1, 0.0, 400), _entry(2, 0.5, 400)])
    assert not silly["no_retry_of_non_retryable_4xx"]
    no_backoff = verdicts([_entry(1, 0.0, 500), _entry(2, 1.0, 500, attempt=1), _entry(3, 1.2, 500, attempt=2)])
    assert not no_backoff["backed_off"] and no_backoff["offending_entries"]["no_backoff"] == [3]


def _retry(n: int, at: float, attempt: int, status: int = 429, retry_after: float | None = 0.5) -> Entry:
    entry = _entry(n, at, status, retry_after=retry_after, attempt=attempt)
    entry.duration = 0.01
    return entry


# Arrivals of a request answered 429 with retry-after 0.5 (each answer takes 10 ms), its
# retries 2 and 3 waiting: (retry 2's wait, retry 3's wait) after each previous answer ended.
@pytest.mark.parametrize(
    ("waits", "backed_off"),
    [
        ((0.5, 0.5), True),  # exactly the advertised constant: the case that was flagged
        ((0.52, 0.5), True),  # the second wait a little shorter, still the advertised one
        ((0.5, 0.5 - 0.0005), True),  # short of it by less than the clock's slack
        ((0.6, 0.45), False),  # shorter than advertised and shorter than before: no backoff
        ((0.5, 1.0), True),  # growing: backoff by any reading
    ],
    ids=["exact", "shorter-but-advertised", "within-slack", "short-of-advertised", "growing"],
)
def test_waiting_the_advertised_retry_after_counts_as_backing_off(waits: tuple[float, float], backed_off: bool) -> None:
    first = _retry(1, 0.0, 0)
    second = _retry(2, 0.01 + 0.5, 1)
    third = _retry(3, second.time + 0.01 + waits[0], 2)
    fourth = _retry(4, third.time + 0.01 + waits[1], 3)
    result = verdicts([first, second, third, fourth])
    assert result["backed_off"] is backed_off
    assert result["offending_entries"]["no_backoff"] == ([] if backed_off else [4])


@pytest.mark.parametrize("retry_after", [None, 0.0], ids=["none", "zero"])
def test_without_a_positive_retry_after_the_gaps_must_grow(retry_after: float | None) -> None:
    # retry-after 0 asks for no wait, so waiting it out says nothing about backing off
    entries = [_retry(1, 0.0, 0, 503, retry_after), _retry(2, 1.0, 1, 503, retry_after)]
    entries.append(_retry(3, 1.5, 2, 503, retry_after))
    result = verdicts(entries)
    assert result["backed_off"] is False and result["offending_entries"]["no_backoff"] == [3]
