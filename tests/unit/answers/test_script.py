"""Scripted answers: which request gets which decided answer — matching, counting, sessions,
the rules file, the admin API and the ``--rules`` flag."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from starlette.testclient import TestClient

from mockserver.answers.scripted import RuleError, Script, ScriptExhausted, ScriptRule
from mockserver.app import create_app
from mockserver.cli import main
from mockserver.config import Settings
from mockserver.spine.backend import ModelBase
from mockserver.spine.events import Event
from mockserver.spine.request import Answer, ChatMessage, ForcedCall, GenerationRequest, Prompt, Sampling, Tool
from mockserver.state.sync import drive
from tests.support.live import FROZEN, serve_in_process

ADMIN = "/__mockserver"


def chat(*turns: tuple[str, str] | str, model: str = "m", tools: bool = False) -> GenerationRequest:
    """A chat request; a bare string is a user turn."""
    messages = tuple(ChatMessage("user", t) if isinstance(t, str) else ChatMessage(*t) for t in turns)
    offered = (Tool("get_weather"),) if tools else ()
    return GenerationRequest("chat", model, (Prompt(messages=messages),), 1, Sampling(), 0, 8192, tools=offered)


def completion(*prompts: str | tuple[int, ...], model: str = "m") -> GenerationRequest:
    made = tuple(Prompt(text=p) if isinstance(p, str) else Prompt(token_ids=p) for p in prompts)
    return GenerationRequest("completions", model, made, 1, Sampling(), 0, 8192)


def said(script: Script, request: GenerationRequest, surface: str = "chat", session: str | None = None) -> str | None:
    """What the script answers, in short: the text, ``call:name``, ``refusal:...`` or None."""
    answer = drive(script.answer(request, surface, session))
    if answer is None:
        return None
    if answer.tool_calls:
        return "call:" + ",".join(c.name for c in answer.tool_calls)
    return f"refusal:{answer.refusal}" if answer.refusal is not None else answer.text


# ---- matching ------------------------------------------------------------------------------


def test_the_first_matching_rule_decides_in_the_order_added() -> None:
    script = Script()
    script.add(text="weather", match="weather")
    script.add(text="anything")
    script.add(text="never", match="weather")
    assert said(script, chat("what's the weather?")) == "weather"
    assert said(script, chat("hello")) == "anything"


@pytest.mark.parametrize(
    ("rule", "request_", "surface", "expected"),
    [
        pytest.param({"endpoint": "chat"}, chat("x"), "chat", True, id="endpoint-chat"),
        pytest.param({"endpoint": "chat"}, chat("x"), "responses", False, id="endpoint-responses-is-not-chat"),
        pytest.param({"endpoint": "responses"}, chat("x"), "responses", True, id="endpoint-responses"),
        pytest.param({"endpoint": "completions"}, completion("x"), "completions", True, id="endpoint-completions"),
        pytest.param({"model": "gpt-4o"}, chat("x", model="gpt-4o"), "chat", True, id="model"),
        pytest.param({"model": "gpt-4o"}, chat("x", model="gpt-4o-mini"), "chat", False, id="model-exact"),
        pytest.param({"tools": True}, chat("x", tools=True), "chat", True, id="tools-offered"),
        pytest.param({"tools": True}, chat("x"), "chat", False, id="tools-not-offered"),
        pytest.param({"tools": False}, chat("x"), "chat", True, id="no-tools"),
        pytest.param({"match": "weather"}, chat("the weather in Paris"), "chat", True, id="match-searches"),
        pytest.param({"match": "^weather"}, chat("the weather"), "chat", False, id="match-anchored"),
        pytest.param({"match": "(?i)WEATHER"}, chat("weather"), "chat", True, id="match-inline-flags"),
        pytest.param(
            {"match": "weather"},
            chat("weather?", ("assistant", "Sunny."), "thanks"),
            "chat",
            False,
            id="match-only-the-last-user-message",
        ),
        pytest.param(
            {"match": "weather"},
            chat(("system", "weather bot"), "hi", ("assistant", "weather")),
            "chat",
            False,
            id="match-not-system-or-assistant",
        ),
        pytest.param(
            {"match": "weather"},
            chat("hi", ("assistant", "ok"), "weather", ("assistant", "…")),
            "chat",
            True,
            id="match-last-user-even-if-not-last-message",
        ),
        pytest.param({"match": "weather"}, chat(("system", "s")), "chat", False, id="match-without-user-message"),
        pytest.param({"match": "Once upon"}, completion("Once upon a time"), "completions", True, id="prompt"),
        pytest.param({"match": "b"}, completion("a", "b"), "completions", True, id="any-of-several-prompts"),
        pytest.param({"match": "1"}, completion((1, 2, 3)), "completions", False, id="token-ids-have-no-text"),
        pytest.param({}, completion((1, 2, 3)), "completions", True, id="no-filter-matches-token-ids"),
    ],
)
def test_matching(rule: dict[str, Any], request_: GenerationRequest, surface: str, expected: bool) -> None:
    script = Script()
    script.add(rule, text="scripted")
    assert (said(script, request_, surface) == "scripted") is expected


def test_the_answer_kinds() -> None:
    script = Script()
    script.add(text="Sunny.", finish_reason="length", match="text")
    script.add(refusal="I can't help with that.", match="refuse")
    script.add(
        match="call",
        tool_calls=[
            {"name": "get_weather", "arguments": {"city": "Zürich", "days": [1, 2]}},
            {"name": "get_time", "arguments": '{"tz": "UTC"}', "id": "call_1"},
            {"name": "lookup"},
        ],
    )
    assert drive(script.answer(chat("text"), "chat")) == Answer(text="Sunny.", finish_reason="length")
    assert drive(script.answer(chat("refuse"), "chat")) == Answer(refusal="I can't help with that.")
    assert drive(script.answer(chat("call"), "chat")) == Answer(
        tool_calls=(
            ForcedCall("get_weather", '{"city":"Zürich","days":[1,2]}'),  # compact, not ASCII-escaped
            ForcedCall("get_time", '{"tz": "UTC"}', "call_1"),  # JSON text is kept as written
            ForcedCall("lookup", None),  # arguments to be made from the tool's schema
        )
    )


# ---- counting: nth, times, sequences -------------------------------------------------------


def test_nth_counts_only_matching_calls_and_falls_through_otherwise() -> None:
    script = Script()
    script.add(text="third", match="weather", nth=3)
    script.add(text="2nd or 4th", match="weather", nth=[2, 4])
    script.add(text="default")
    asked = ["weather", "hello", "weather", "hello", "weather", "weather", "weather"]
    # The second rule counts every weather call, including the one the first rule answered.
    assert [said(script, chat(t)) for t in asked] == [
        "default",
        "default",
        "2nd or 4th",
        "default",
        "third",
        "2nd or 4th",
        "default",
    ]


def test_times_answers_the_first_calls_only() -> None:
    script = Script()
    script.add(text="scripted", times=2)
    assert [said(script, chat("x")) for _ in range(4)] == ["scripted", "scripted", None, None]


def test_a_sequence_repeats_its_last_answer_by_default() -> None:
    script = Script()
    script.add(sequence=["A", {"tool_calls": [{"name": "f"}]}, {"refusal": "no"}])
    assert [said(script, chat("x")) for _ in range(5)] == ["A", "call:f", "refusal:no", "refusal:no", "refusal:no"]


def test_an_exhausted_sequence_can_be_an_error_that_is_not_retried() -> None:
    script = Script()
    rule = script.add(sequence=["A", "B"], then="error")
    assert [said(script, chat("x")) for _ in range(2)] == ["A", "B"]
    with pytest.raises(ScriptExhausted) as raised:
        drive(script.answer(chat("x"), "chat"))
    error = raised.value
    assert error.status == 400 and error.code == "script_exhausted" and error.headers["x-should-retry"] == "false"
    assert error.message == f"Scripted rule {rule.id} has no answers left (its sequence of 2 is exhausted)."
    assert error.body()["error"]["type"] == "invalid_request_error"


def test_a_sequence_moves_on_only_when_its_rule_answers() -> None:
    script = Script()
    script.add(sequence=["A", "B"], match="weather", nth=[2, 3])
    asked = ["weather", "other", "weather", "weather", "weather"]
    assert [said(script, chat(t)) for t in asked] == [None, None, "A", "B", None]


def test_the_exhausting_call_is_still_counted_by_the_rules_after_it() -> None:
    script = Script()
    script.add(sequence=["A"], then="error", nth=[1, 2])
    script.add(text="second", nth=2)
    assert said(script, chat("x")) == "A"
    with pytest.raises(ScriptExhausted):
        drive(script.answer(chat("x"), "chat"))
    assert said(script, chat("x")) is None  # the later rule counted call 2 although the error won


# ---- sessions ------------------------------------------------------------------------------


def test_sessions_have_their_own_rules_and_counters() -> None:
    script = Script()
    script.add(sequence=["g1", "g2"])  # global: counted per session
    script.add(text="only s1", session="s1", nth=2)
    assert [said(script, chat("x"), session="s1") for _ in range(3)] == ["g1", "only s1", "g2"]
    assert [said(script, chat("x"), session="s2") for _ in range(3)] == ["g1", "g2", "g2"]
    assert [said(script, chat("x")) for _ in range(2)] == ["g1", "g2"]  # no session: a session of its own


def test_session_rules_go_before_global_rules() -> None:
    script = Script()
    script.add(text="global")
    script.add(text="mine", session="s1")
    assert said(script, chat("x"), session="s1") == "mine"
    assert said(script, chat("x"), session="s2") == "global"


def test_clearing_a_session_leaves_the_others_alone() -> None:
    script = Script()
    script.add(sequence=["A", "B"])
    s1 = script.add(text="s1", session="s1", nth=[2])
    s2 = script.add(text="s2", session="s2")
    assert said(script, chat("x"), session="s1") == "A" and said(script, chat("x"), session="s2") == "s2"
    script.clear("s1")
    assert script.rules("s1") == [] and script.rules("s2") == [s2] and s1 not in script.rules()
    assert said(script, chat("x"), session="s1") == "A"  # its counters start again
    assert said(script, chat("x")) == "A"
    assert said(script, chat("x")) == "B"
    script.clear()
    assert script.rules() == [] and said(script, chat("x")) is None


def test_concurrent_sessions_do_not_interfere() -> None:
    script = Script()
    script.add(text="odd", match="odd", nth=[2])
    script.add(sequence=["A", "B", "C"])
    start = threading.Barrier(8)

    def worker(n: int) -> list[str | None]:
        start.wait()
        session = f"worker-{n}"
        return [said(script, chat("odd" if n % 2 else "even"), session=session) for _ in range(5)]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(worker, range(8)))
    for n, got in enumerate(results):
        assert got == (["A", "odd", "B", "C", "C"] if n % 2 else ["A", "B", "C", "C", "C"]), n


# ---- the Python API and the JSON form ------------------------------------------------------


def test_add_takes_a_mapping_keywords_or_both_and_assigns_increasing_ids() -> None:
    script = Script()
    first = script.add({"text": "a", "match": "x"}, nth=2)
    second = script.add(text="b", session="s")
    third = script.add({"text": "c", "session": "own"}, session="default")
    assert (first.id, second.id, third.id) == (1, 2, 3)
    assert first.nth == (2,) and first.match is not None and first.match.pattern == "x"
    assert second.session == "s" and third.session == "own"  # a rule's own session wins


@pytest.mark.parametrize(
    "data",
    [
        {"text": "hi", "endpoint": "chat", "model": "m", "match": "w.*r", "tools": True, "nth": [1, 3], "times": 5},
        {"tool_calls": [{"name": "f", "arguments": {"a": 1}, "id": "c1"}, {"name": "g"}], "finish_reason": "stop"},
        {"refusal": "no", "session": "s"},
        {"sequence": [{"text": "A"}, {"refusal": "B", "finish_reason": "content_filter"}], "then": "error"},
    ],
    ids=["filters", "tool-calls", "refusal", "sequence"],
)
def test_to_json_round_trips(data: dict[str, Any]) -> None:
    rule = Script().add(data)
    shown = rule.to_json()
    assert shown.pop("id") == 1
    assert ScriptRule.from_json(shown, rule_id=1) == rule


@pytest.mark.parametrize(
    ("data", "field", "fragment"),
    [
        pytest.param({"text": "x", "tool_call": []}, "tool_call", "did you mean 'tool_calls'?", id="unknown-field"),
        pytest.param({"match": "x"}, None, "needs an answer", id="no-answer"),
        pytest.param({"text": "x", "refusal": "y"}, "refusal", "exclude each other", id="two-answers"),
        pytest.param({"text": 3}, "text", "must be a string, not int 3", id="text-type"),
        pytest.param({"text": "x", "match": "(unclosed"}, "match", "not a valid regular expression", id="regex"),
        pytest.param({"text": "x", "endpoint": "embeddings"}, "endpoint", "one of chat, completions", id="endpoint"),
        pytest.param({"text": "x", "tools": "yes"}, "tools", "true or false", id="tools-type"),
        pytest.param({"text": "x", "nth": 0}, "nth", "call number ≥ 1", id="nth-zero"),
        pytest.param({"text": "x", "nth": []}, "nth", "call number ≥ 1", id="nth-empty"),
        pytest.param({"text": "x", "nth": True}, "nth", "call number ≥ 1", id="nth-bool"),
        pytest.param({"text": "x", "times": 0}, "times", "≥ 1", id="times"),
        pytest.param({"text": "x", "finish_reason": "done"}, "finish_reason", "one of stop, length", id="finish"),
        pytest.param({"text": "x", "then": "error"}, "then", "a 'sequence' only", id="then-without-sequence"),
        pytest.param({"sequence": []}, "sequence", "non-empty list", id="empty-sequence"),
        pytest.param({"sequence": ["a"], "then": "loop"}, "then", "'repeat_last' or 'error'", id="then-value"),
        pytest.param({"sequence": ["a"], "finish_reason": "stop"}, "finish_reason", "each answer", id="seq-finish"),
        pytest.param({"sequence": ["a", 7]}, "sequence[1]", "must be an answer", id="sequence-item"),
        pytest.param({"sequence": [{"txt": "a"}]}, "sequence[0].txt", "did you mean 'text'?", id="sequence-field"),
        pytest.param({"sequence": [{"text": "a", "refusal": "b"}]}, "sequence[0]", "exactly one", id="seq-two"),
        pytest.param({"tool_calls": []}, "tool_calls", "non-empty list", id="no-calls"),
        pytest.param({"tool_calls": ["f"]}, "tool_calls[0]", "mapping with 'name'", id="call-not-mapping"),
        pytest.param({"tool_calls": [{"arguments": {}}]}, "tool_calls[0].name", "is required", id="call-no-name"),
        pytest.param(
            {"tool_calls": [{"name": "f", "arguments": "{oops"}]},
            "tool_calls[0].arguments",
            "not valid JSON",
            id="arguments-not-json",
        ),
        pytest.param(
            {"tool_calls": [{"name": "f", "arguments": "[1]"}]},
            "tool_calls[0].arguments",
            "a JSON object",
            id="arguments-not-an-object",
        ),
        pytest.param(
            {"tool_calls": [{"name": "f", "arguments": 5}]},
            "tool_calls[0].arguments",
            "mapping or JSON text",
            id="arguments-type",
        ),
        pytest.param(
            {"sequence": [{"tool_calls": [{"name": "f", "args": {}}]}]},
            "sequence[0].tool_calls[0].args",
            "did you mean 'arguments'?",
            id="nested-unknown",
        ),
    ],
)
def test_bad_rules_name_the_field(data: dict[str, Any], field: str | None, fragment: str) -> None:
    script = Script()
    with pytest.raises(RuleError) as raised:
        script.add(data)
    assert raised.value.field == field
    assert fragment in str(raised.value)
    if field is not None:
        assert repr(field) in str(raised.value) or f"'{field.split('.')[-1]}'" in str(raised.value)
    assert script.rules() == []


def test_extend_adds_all_or_none_and_names_the_position() -> None:
    script = Script()
    with pytest.raises(RuleError, match=r"^rule 2 \(match 'weather'\): unknown field 'tool_call'"):
        script.extend([{"text": "a"}, {"match": "weather", "tool_call": [{"name": "f"}]}])
    assert script.rules() == []
    added = script.extend([{"text": "a"}, {"refusal": "b"}], session="s")
    assert [r.session for r in added] == ["s", "s"] and [r.id for r in added] == [1, 2]


# ---- the rules file ------------------------------------------------------------------------

GOOD = """\
# Scripted answers, first match wins.
- match: weather
  tools: true
  tool_calls:
    - name: get_weather
      arguments: {city: Paris}
- match: (?i)story
  sequence:
    - Once upon a time.
    - text: The end.
      finish_reason: length
  then: error
- endpoint: completions
  nth: [2]
  text: the second completion
"""


def test_a_rules_file_loads_and_answers(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(GOOD)
    script = Script()
    rules = script.load_file(path)
    assert [r.id for r in rules] == [1, 2, 3] and {r.source for r in rules} == {str(path)}
    assert drive(script.answer(chat("weather?", tools=True), "chat")) == Answer(
        tool_calls=(ForcedCall("get_weather", '{"city":"Paris"}'),)
    )
    assert said(script, chat("weather?")) is None  # no tools offered
    assert [said(script, chat("A STORY")) for _ in range(2)] == ["Once upon a time.", "The end."]
    assert [said(script, completion("x"), "completions") for _ in range(3)] == [None, "the second completion", None]


def test_a_mapping_with_rules_loads_too_and_an_empty_file_has_none(tmp_path: Path) -> None:
    wrapped, empty = tmp_path / "wrapped.yaml", tmp_path / "empty.yaml"
    wrapped.write_text("rules:\n  - text: hi\n")
    empty.write_text("# nothing yet\n")
    script = Script()
    assert [r.to_json()["text"] for r in script.load_file(wrapped)] == ["hi"]
    assert script.load_file(empty) == []


def test_pinned_rules_survive_clear(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("- sequence: [A, B]\n")
    script = Script()
    script.load_file(path, pinned=True)
    script.add(text="added", match="added")
    assert [said(script, chat("x")) for _ in range(2)] == ["A", "B"]
    script.clear()
    assert [r.source for r in script.rules()] == [str(path)]
    assert said(script, chat("x")) == "A"  # counted from zero again
    script.clear(pinned=True)
    assert script.rules() == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "- text: a\n- text: b\n- match: weather\n  tool_call: [{name: f}]\n",
            "rule 3 (match 'weather'): unknown field 'tool_call' (did you mean 'tool_calls'?",
            id="unknown-field",
        ),
        pytest.param(
            "- text: a\n- match: '('\n  text: b\n", "rule 2 (match '('): field 'match' is not a valid", id="re"
        ),
        pytest.param(
            "- model: gpt-4o\n  nth: first\n  text: x\n", "rule 1 (model 'gpt-4o'): field 'nth' must be", id="nth"
        ),
        pytest.param(
            "- text: a\n- tool_calls:\n  - name: f\n    arguments: '{bad'\n",
            "rule 2: field 'tool_calls[0].arguments' is not valid JSON",
            id="arguments",
        ),
        pytest.param(
            "- tool_calls: [{name: f, arguments: {day: 2024-01-01}}]\n",
            "rule 1: field 'tool_calls[0].arguments' cannot be JSON",
            id="yaml-date",
        ),
        pytest.param("- sequence: [a, [b]]\n", "rule 1: 'sequence[1]' must be an answer", id="sequence-item"),
        pytest.param("- just a string\n", "rule 1: a rule must be a mapping of fields, not str", id="not-a-mapping"),
        pytest.param("text: a\n", "expected a list of rules, or a mapping with one key 'rules'", id="not-a-list"),
        pytest.param("- text: [a\n", "not valid YAML", id="yaml-syntax"),
    ],
)
def test_a_bad_rules_file_names_the_file_the_rule_and_the_field(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    script = Script()
    with pytest.raises(RuleError) as raised:
        script.load_file(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert expected in str(raised.value)
    assert script.rules() == []  # all or none


def test_a_missing_rules_file(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match="cannot read the rules file"):
        Script().load_file(tmp_path / "nope.yaml")


# ---- settings, the command line and the app ------------------------------------------------

BAD = "- text: a\n- match: weather\n  tool_call: [{name: f}]\n"


def test_settings_refuse_a_broken_rules_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    with pytest.raises(ValidationError, match=r"rule 2 \(match 'weather'\): unknown field 'tool_call'"):
        Settings(rules=str(bad))


def test_serve_with_a_broken_rules_file_exits_with_the_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    assert main(["serve", "--rules", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mockserver: invalid --rules: ")
    assert f"{bad}: rule 2 (match 'weather'): unknown field 'tool_call'" in err
    assert "Traceback" not in err


def test_serve_loads_the_rules_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(GOOD)
    with serve_in_process(["--rules", str(path)]) as live:
        listed = httpx.get(live.url + ADMIN + "/answers").json()["rules"]
        assert [r["id"] for r in listed] == [1, 2, 3] and listed[0]["match"] == "weather"


# ---- the admin API -------------------------------------------------------------------------


class _Silent(ModelBase):
    """A backend that is never asked: these tests only talk to the admin API."""

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        return
        yield


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[TestClient]:
    path = tmp_path / "rules.yaml"
    path.write_text("- match: pinned\n  text: from the file\n")
    app = create_app(Settings(frozen_time=FROZEN, rules=str(path)), backend=_Silent())
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client


def _script(client: TestClient) -> Script:
    script: Script = client.app.state.ctx.script  # type: ignore[attr-defined]
    return script


def test_admin_adds_lists_and_clears_answers(admin: TestClient) -> None:
    added = admin.post(ADMIN + "/answers", json={"text": "Sunny.", "match": "weather", "nth": 2})
    assert added.status_code == 200
    assert added.json() == {"rules": [{"id": 2, "match": "weather", "nth": [2], "text": "Sunny."}]}
    several = admin.post(ADMIN + "/answers", json=[{"text": "a"}, {"tool_calls": [{"name": "f"}]}])
    assert [r["id"] for r in several.json()["rules"]] == [3, 4]
    wrapped = admin.post(ADMIN + "/answers", json={"rules": [{"refusal": "no"}]})
    assert [r["id"] for r in wrapped.json()["rules"]] == [5]
    listed = admin.get(ADMIN + "/answers").json()["rules"]
    assert [r["id"] for r in listed] == [1, 2, 3, 4, 5] and listed[0]["source"].endswith("rules.yaml")
    assert said(_script(admin), chat("pinned")) == "from the file"  # the API and Python see one script
    assert admin.delete(ADMIN + "/answers/3").json() == {"deleted": 3}
    assert admin.delete(ADMIN + "/answers/3").status_code == 404
    assert admin.delete(ADMIN + "/answers").json() == {"cleared": True}
    assert [r["id"] for r in admin.get(ADMIN + "/answers").json()["rules"]] == [1]  # the file's stay


def test_admin_answers_are_session_scoped(admin: TestClient) -> None:
    admin.post(ADMIN + "/answers", json={"text": "one"}, headers={"x-mockserver-session": "s1"})
    admin.post(ADMIN + "/answers", params={"session": "s2"}, json={"text": "two"})
    # a rule naming another session than its request's is refused (issue 16: sessions must agree)
    other = admin.post(ADMIN + "/answers", params={"session": "s2"}, json={"text": "mine", "session": "s3"})
    assert other.status_code == 400 and other.json()["error"]["param"] == "session"
    admin.post(ADMIN + "/answers", json={"text": "mine", "session": "s3"})  # without a request session it may
    assert [r["text"] for r in admin.get(ADMIN + "/answers", params={"session": "s1"}).json()["rules"]] == ["one"]
    got = admin.get(ADMIN + "/answers", headers={"x-mockserver-session": "s2"}).json()["rules"]
    assert [(r["text"], r["session"]) for r in got] == [("two", "s2")]
    script = _script(admin)
    assert said(script, chat("x"), session="s1") == "one" and said(script, chat("x"), session="s2") == "two"
    admin.delete(ADMIN + "/answers", params={"session": "s1"})
    assert said(script, chat("x"), session="s1") is None and said(script, chat("x"), session="s2") == "two"
    admin.post(ADMIN + "/reset", params={"session": "s2"})
    assert said(script, chat("x"), session="s2") is None and said(script, chat("x"), session="s3") == "mine"
    admin.post(ADMIN + "/reset")
    assert [r["match"] for r in admin.get(ADMIN + "/answers").json()["rules"]] == ["pinned"]


@pytest.mark.parametrize(
    ("body", "param", "fragment"),
    [
        pytest.param({"text": "x", "tool_call": []}, "tool_call", "unknown field 'tool_call'", id="unknown"),
        pytest.param({"text": "x", "match": "("}, "match", "not a valid regular expression", id="regex"),
        pytest.param(
            [{"text": "ok"}, {"tool_calls": [{"name": "f", "arguments": "{"}]}],
            "tool_calls[0].arguments",
            "rule 2: field 'tool_calls[0].arguments' is not valid JSON",
            id="list-second-bad",
        ),
        pytest.param({"match": "x"}, None, "needs an answer", id="no-answer"),
        pytest.param([1], None, "rule 1: a rule must be a mapping", id="list-of-non-mapping"),
    ],
)
def test_admin_rejects_bad_rules_in_the_envelope(
    admin: TestClient, body: Any, param: str | None, fragment: str
) -> None:
    response = admin.post(ADMIN + "/answers", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and fragment in error["message"]
    assert [r["id"] for r in admin.get(ADMIN + "/answers").json()["rules"]] == [1]  # nothing added


def test_admin_answers_with_a_body_that_is_not_json(admin: TestClient) -> None:
    for raw in (b"[not json", b"{nope", b'"a string"'):
        response = admin.post(ADMIN + "/answers", content=raw, headers={"content-type": "application/json"})
        assert response.status_code == 400 and "error" in response.json(), raw


def test_admin_answers_are_loopback_only(tmp_path: Path) -> None:
    app = create_app(Settings(frozen_time=FROZEN), backend=_Silent())
    with TestClient(app, base_url="http://127.0.0.1", client=("10.0.0.7", 5000)) as remote:
        assert remote.get(ADMIN + "/answers").status_code == 403
