"""What the journal keeps of an answer for the console: its headers, its first bytes, when each
body message went out — bounded apart from the request bodies, so the console never costs an
entry its place in the journal."""

from __future__ import annotations

import time

import pytest

from mockserver.faults import journal as journal_module
from mockserver.faults.journal import ANSWER_KEPT, Entry, Journal

SSE = [(b"content-type", b"text/event-stream; charset=utf-8")]


def answered(journal: Journal, chunks: list[bytes], headers: list[tuple[bytes, bytes]] = SSE) -> Entry:
    """An entry answered with ``chunks``, as the edge's ``send`` writes it."""
    entry = journal.open(time=time.time(), method="POST", path="/v1/chat/completions", session=None, retry_attempt=0)
    entry.status = 200
    entry.answering(headers, not headers[0][1].startswith(b"audio/"))
    for chunk in chunks:
        entry.bytes += len(chunk)
        entry.answered(chunk)
    entry.ended = "done"
    journal.settle(entry)
    return entry


def test_an_answer_its_headers_and_the_time_of_each_message() -> None:
    journal = Journal()
    entry = answered(journal, [b"data: {}\n\n", b"data: {}\n\ndata: {}\n\n", b"data: [DONE]\n\n"])
    (read,) = journal.entries()
    assert read.answer == "data: {}\n\n" * 3 + "data: [DONE]\n\n"
    assert [n for _, n in read.marks] == [10, 30, 44]  # bytes sent by the end of each message
    times = [t for t, _ in read.marks]
    assert times == sorted(times) and 0 <= times[0] < 5
    assert Entry(**entry.to_json()) == entry  # through JSON (a shared journal, mockserver.calls) and back
    assert entry.to_json()["answer_headers"] == [["content-type", "text/event-stream; charset=utf-8"]]


def test_the_answer_is_kept_up_to_its_bound_and_audio_not_at_all() -> None:
    journal = Journal()
    big = answered(journal, [b"x" * (ANSWER_KEPT - 10), b"y" * 100, b"z" * 100])
    assert big.answer == "x" * (ANSWER_KEPT - 10) + "y" * 10 and big.bytes == ANSWER_KEPT + 190
    audio = answered(journal, [b"\xff\xfb" * 1000], [(b"content-type", b"audio/mpeg")])
    assert audio.answer is None and len(audio.marks) == 1  # its timing is kept, its bytes not


def test_past_the_answers_budget_the_oldest_lose_their_answer_not_their_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_module, "ANSWER_BYTES", 1000)
    journal = Journal(size=50)
    for _ in range(20):
        answered(journal, [b"a" * 300])
    entries = journal.entries()
    assert len(entries) == 20  # every entry stays
    assert [e.answer is not None for e in entries] == [False] * 17 + [True] * 3
    journal.clear()
    assert journal.entries() == []
    answered(journal, [b"b" * 300])
    assert journal.entries()[0].answer == "b" * 300


def test_a_ring_that_turns_over_holds_no_answer_of_an_entry_it_dropped() -> None:
    journal = Journal(size=3)
    for _ in range(1000):
        answered(journal, [b"c" * 100])
    assert len(journal.entries()) == 3
    assert len(journal._answers) <= 4  # what the budget holds on to: not the dropped ones
