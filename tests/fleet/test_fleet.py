"""Two and four server processes on one Redis, two on one SQLite file: what one process says or
does, every other one knows — rules, background responses, rate limits, the journal, sequences,
resets. Through the official SDK (the answers) and plain HTTP (the admin API)."""

from __future__ import annotations

import concurrent.futures
import time

import openai
import pytest

from tests.fleet.conftest import QUEUE_TIME, RATE_LIMIT_RPM
from tests.fleet.harness import MODEL, Node, new_session

# One worker runs the whole module (make test: --dist loadgroup), so its fleets start once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fleet")]

TEXT = (
    "The harbour was quiet before dawn. Gulls circled the masts while the fishermen checked "
    "their nets, and the first ferry of the day sounded its horn as it left for the islands."
)


def _ask(node: Node, session: str, content: str = "hello", api_key: str | None = None) -> str:
    done = node.client(session, api_key).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": content}]
    )
    return done.choices[0].message.content or ""


def _answer(node: Node, session: str, rule: dict[str, object]) -> None:
    added = node.admin("POST", "answers", session=session, json=rule)
    assert added.status_code == 200, added.text


def test_a_rule_added_through_one_process_answers_on_every_other(nodes: list[Node]) -> None:
    session = new_session()
    _answer(nodes[0], session, {"text": "added through the first process"})
    for node in nodes:
        assert _ask(node, session) == "added through the first process", node.name
    listed = nodes[-1].admin("GET", "answers", session=session).json()["rules"]
    assert [rule["text"] for rule in listed] == ["added through the first process"]


def _start(node: Node, session: str) -> str:
    """A background response created streaming on ``node``: its first two events (created,
    queued) read, then the connection dropped — the run goes on without it. Its id."""
    stream = node.client(session).responses.create(
        model=MODEL, input="the harbour", background=True, store=True, stream=True
    )
    first = [next(iter(stream)) for _ in range(2)]
    stream.close()
    assert [e.type for e in first] == ["response.created", "response.queued"], first
    opened = first[0]
    assert isinstance(opened, openai.types.responses.ResponseCreatedEvent)
    return opened.response.id


def _advance(node: Node, seconds: float) -> None:
    moved = node.admin("POST", "clock", json={"advance": seconds})
    assert moved.status_code == 200 and moved.json()["virtual"], moved.text


def test_a_background_response_runs_on_one_and_is_resumed_on_another(nodes: list[Node]) -> None:
    a, b, c = nodes[0], nodes[1], nodes[2 % len(nodes)]
    session = new_session()
    _answer(a, session, {"text": TEXT})
    created = _start(a, session)
    assert b.client(session).responses.retrieve(created).status == "queued"  # seen from B
    # B resumes its stream after the first two events (created, queued) while A holds the run
    # queued; the clock moved through C releases it, and B streams A's run live to its end.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        streaming = pool.submit(
            lambda: list(b.client(session).responses.retrieve(created, stream=True, starting_after=1))
        )
        time.sleep(0.3)  # B is waiting on the run's next event
        assert not streaming.done()
        _advance(c, QUEUE_TIME)
        events = streaming.result(timeout=15)
    assert [e.sequence_number for e in events] == list(range(2, 2 + len(events)))
    assert events[0].type == "response.in_progress" and events[-1].type == "response.completed"
    assert "".join(getattr(e, "delta", "") for e in events if e.type == "response.output_text.delta") == TEXT
    done = nodes[-1].client(session).responses.retrieve(created)
    assert done.status == "completed" and done.output_text == TEXT


def test_a_background_response_is_cancelled_from_a_third_process(nodes: list[Node]) -> None:
    a, b, c = nodes[0], nodes[1], nodes[2 % len(nodes)]
    session = new_session()
    _answer(a, session, {"text": TEXT})
    created = _start(a, session)
    cancelled = c.client(session).responses.cancel(created)
    assert cancelled.status == "cancelled"
    # Time enough for the whole run, had it not been stopped: whoever held it let it go, and
    # nobody ran it (one process runs a response, and a cancelled one stays cancelled).
    _advance(b, QUEUE_TIME * 2)
    time.sleep(0.3)
    later = b.client(session).responses.retrieve(created)
    assert later.status == "cancelled" and later.output_text == ""
    events = list(b.client(session).responses.retrieve(created, stream=True, starting_after=0))
    assert not any(e.type in ("response.completed", "response.output_text.delta") for e in events), events


def test_the_rate_limit_is_the_fleets_not_each_processs(nodes: list[Node]) -> None:
    session = new_session()
    _answer(nodes[0], session, {"text": "within the limit"})
    key = f"sk-limit-{session}"
    for i in range(RATE_LIMIT_RPM):
        assert _ask(nodes[i % len(nodes)], session, api_key=key) == "within the limit", i
    with pytest.raises(openai.RateLimitError) as refused:
        _ask(nodes[RATE_LIMIT_RPM % len(nodes)], session, api_key=key)
    assert refused.value.status_code == 429
    assert _ask(nodes[0], session, api_key=f"{key}-other") == "within the limit"  # another key's own bucket


def test_the_journal_on_any_process_holds_every_request(nodes: list[Node]) -> None:
    session = new_session()
    _answer(nodes[0], session, {"text": "noted"})
    sent = [f"request {i} of the journal test" for i in range(2 * len(nodes))]
    for i, content in enumerate(sent):
        assert _ask(nodes[i % len(nodes)], session, content) == "noted"
    for node in nodes:
        entries = node.admin("GET", "journal", session=session).json()["entries"]
        seen = [e["body"]["messages"][0]["content"] for e in entries if e["path"] == "/v1/chat/completions"]
        assert sorted(seen) == sorted(sent), node.name
        assert all(e["status"] == 200 for e in entries), node.name


def test_a_sequence_hands_out_each_step_exactly_once_across_the_fleet(nodes: list[Node]) -> None:
    session = new_session()
    steps = [f"step {i}" for i in range(12)]
    _answer(nodes[0], session, {"sequence": [{"text": s} for s in steps], "then": "error"})
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(lambda i: _ask(nodes[i % len(nodes)], session), range(len(steps))))
    assert sorted(answers) == sorted(steps)  # each step once: none twice, none skipped
    with pytest.raises(openai.BadRequestError) as exhausted:
        _ask(nodes[-1], session)
    assert exhausted.value.code == "script_exhausted"


def test_a_reset_through_one_process_resets_the_fleet(nodes: list[Node]) -> None:
    one, other = new_session(), new_session()
    for session in (one, other):
        _answer(nodes[0], session, {"text": f"rule of {session}"})
        assert _ask(nodes[-1], session) == f"rule of {session}"
    # One session's reset, through the last process: gone everywhere; the other session untouched.
    assert nodes[-1].admin("POST", "reset", session=one).status_code == 200
    for node in nodes:
        assert node.admin("GET", "answers", session=one).json()["rules"] == [], node.name
        assert node.admin("GET", "journal", session=one).json()["entries"] == [], node.name
        assert len(node.admin("GET", "answers", session=other).json()["rules"]) == 1, node.name
    # Everything, through the second process.
    assert nodes[1].admin("POST", "reset").status_code == 200
    for node in nodes:
        assert node.admin("GET", "answers", session=other).json()["rules"] == [], node.name
        assert node.admin("GET", "journal", session=other).json()["entries"] == [], node.name
