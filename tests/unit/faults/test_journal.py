"""The journal's verdicts on a client's retries, from hand-made entries (no server)."""

from __future__ import annotations

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
