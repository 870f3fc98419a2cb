"""Scripted-answer rules, one at a time: the :class:`ScriptRule` record and its definition.

Parses and validates one rule as YAML files, JSON bodies and Python keywords give it (its
filters — ``endpoint``, ``model``, ``match``, ``tools``, ``nth``, ``times``, ``session`` — and
its answer: ``text``, ``tool_calls``, ``refusal`` or a ``sequence`` of them), raising
:class:`RuleError` naming the offending field; and turns a rule back into that JSON. Whether a
rule matches a request and which answer it gives its nth call live here too; the rule book
that holds the rules and counts their calls per session is :mod:`mockserver.answers.scripted`.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mockserver.answers.match_pattern import MatchPattern, PatternError
from mockserver.answers.match_pattern import compiled as match_pattern
from mockserver.errors import InvalidRequest
from mockserver.spine.request import Answer, ForcedCall, Surface

__all__ = ["RuleError", "ScriptExhausted", "ScriptRule", "Surface", "Then"]

Then = Literal["repeat_last", "error"]

_SURFACES = ("chat", "completions", "responses")
_FINISH = ("stop", "length", "tool_calls", "content_filter")
_ANSWERS = ("text", "tool_calls", "refusal")
_ANSWER_FIELDS = frozenset((*_ANSWERS, "finish_reason"))
_RULE_FIELDS = frozenset(
    ("endpoint", "model", "match", "tools", "nth", "times", "session", "sequence", "then", *_ANSWER_FIELDS)
)
_CALL_FIELDS = frozenset(("name", "arguments", "id"))


class RuleError(ValueError):
    """A rule that cannot be used. ``field`` is the offending field as a path
    (``match``, ``sequence[1].tool_calls[0].arguments``), None when no one field is to blame."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ScriptExhausted(InvalidRequest):
    """A ``sequence`` rule with ``then: error`` asked for an answer past its last one.

    A 400, not a 409 or a 5xx: SDKs retry those, and a test that has run out of script should
    fail at once, with a message that says so, rather than after three retries.
    """

    def __init__(self, rule: ScriptRule) -> None:
        super().__init__(
            f"Scripted rule {rule.id} has no answers left (its sequence of {len(rule.answers)} is exhausted).",
            code="script_exhausted",
            headers={"x-should-retry": "false"},
        )


@dataclass(frozen=True, slots=True)
class ScriptRule:
    answers: tuple[Answer, ...]  # one, or a sequence's
    id: int = 0
    endpoint: Surface | None = None
    model: str | None = None
    match: MatchPattern | None = None  # searched with a time bound (see match_pattern)
    tools: bool | None = None
    nth: tuple[int, ...] = ()  # only these matching calls (1 = the first)
    times: int | None = None  # only the first N matching calls
    session: str | None = None
    sequence: bool = False  # ``answers`` came as a sequence (else it holds the one answer)
    then: Then = "repeat_last"  # a sequence past its end
    source: str | None = None  # the file the rule was loaded from
    pinned: bool = False  # survives clear() and reset (the --rules file's rules)

    @classmethod
    def from_json(cls, data: Any, rule_id: int = 0) -> ScriptRule:
        """A rule as files, the admin API and Python give it; :class:`RuleError` naming the field if wrong."""
        if not isinstance(data, Mapping):
            raise RuleError(f"a rule must be a mapping of fields, not {_shown(data)}")
        _no_unknown(data, _RULE_FIELDS, "")
        given = [k for k in (*_ANSWERS, "sequence") if data.get(k) is not None]
        if len(given) != 1:
            raise RuleError(
                "a rule needs an answer: 'text', 'tool_calls', 'refusal' or 'sequence'"
                if not given
                else f"fields {given[0]!r} and {given[1]!r} exclude each other (a 'sequence' gives several answers)",
                given[1] if given else None,
            )
        pattern = _get(data, "match", _is_str, "a string (a regular expression)")
        try:
            compiled = match_pattern(pattern) if pattern is not None else None
        except PatternError as exc:
            raise RuleError(f"field 'match' {exc}", "match") from None
        nth = _get(data, "nth", _call_numbers, "a call number ≥ 1 or a list of them")
        sequence = _get(data, "sequence", _non_empty_list, "a non-empty list of answers")
        then = _get(data, "then", ("repeat_last", "error").__contains__, "'repeat_last' or 'error'")
        if sequence is None:
            if then is not None:
                raise RuleError("field 'then' applies to a 'sequence' only", "then")
            answers: tuple[Answer, ...] = (_answer({k: data[k] for k in _ANSWER_FIELDS if k in data}, ""),)
        elif "finish_reason" in data:
            raise RuleError("field 'finish_reason' goes on each answer of a 'sequence'", "finish_reason")
        else:
            answers = tuple(_answer(item, f"sequence[{i}]") for i, item in enumerate(sequence))
        return cls(
            answers=answers,
            id=rule_id,
            endpoint=_get(data, "endpoint", _SURFACES.__contains__, f"one of {', '.join(_SURFACES)}"),
            model=_get(data, "model", _is_str, "a string"),
            match=compiled,
            tools=_get(data, "tools", _is_bool, "true or false"),
            nth=(nth,) if _is_int(nth) else tuple(nth or ()),
            times=_get(data, "times", lambda v: _is_int(v) and v >= 1, "a number of calls ≥ 1"),
            session=_get(data, "session", _is_str, "a string"),
            sequence=sequence is not None,
            then=then or "repeat_last",
        )

    def to_json(self) -> dict[str, Any]:
        """The rule as :meth:`from_json` takes it, with its ``id`` (and ``source``, if loaded)."""
        out: dict[str, Any] = {"id": self.id}
        for name in ("endpoint", "model", "tools", "times", "session"):
            if (value := getattr(self, name)) is not None:
                out[name] = value
        if self.match is not None:
            out["match"] = self.match.pattern
        if self.nth:
            out["nth"] = list(self.nth)
        if self.sequence:
            out["sequence"] = [_answer_json(a) for a in self.answers]
            out["then"] = self.then
        else:
            out.update(_answer_json(self.answers[0]))
        if self.source is not None:
            out["source"] = self.source
        return out

    def matches(self, surface: str, model: str, tools: bool, subjects: tuple[str, ...]) -> bool:
        """Everything but the session and the call count; ``subjects`` are the texts ``match`` searches."""
        return (
            (self.endpoint is None or self.endpoint == surface)
            and (self.model is None or self.model == model)
            and (self.tools is None or self.tools == tools)
            and (self.match is None or any(self.match.search(s) for s in subjects))
        )

    def takes(self, call: int) -> bool:
        """Does the rule answer its ``call``-th matching call?"""
        return (self.times is None or call <= self.times) and (not self.nth or call in self.nth)

    def answer_at(self, index: int) -> Answer:
        """The answer for the rule's ``index``-th answered call (0-based)."""
        if index < len(self.answers):
            return self.answers[index]
        if self.then == "error":
            raise ScriptExhausted(self)
        return self.answers[-1]


def _answer(data: Any, where: str) -> Answer:
    """One answer: text, tool_calls or refusal, and a finish_reason; in a sequence a bare string is text."""
    if isinstance(data, str) and where:
        return Answer(text=data)
    if not isinstance(data, Mapping):
        raise RuleError(f"{where!r} must be an answer (text, tool_calls or refusal), not {_shown(data)}", where)
    prefix = f"{where}." if where else ""
    _no_unknown(data, _ANSWER_FIELDS, prefix)
    given = [k for k in _ANSWERS if data.get(k) is not None]
    if len(given) != 1:
        raise RuleError(f"{where or 'a rule'!r} needs exactly one of 'text', 'tool_calls', 'refusal'", where)
    finish = _get(data, "finish_reason", _FINISH.__contains__, f"one of {', '.join(_FINISH)}", prefix)
    calls = _get(data, "tool_calls", _non_empty_list, "a non-empty list of calls", prefix)
    return Answer(
        text=_get(data, "text", _is_str, "a string", prefix) or "",
        tool_calls=tuple(_call(call, f"{prefix}tool_calls[{i}]") for i, call in enumerate(calls or ())),
        refusal=_get(data, "refusal", _is_str, "a string", prefix),
        finish_reason=finish,
    )


def _call(data: Any, where: str) -> ForcedCall:
    if not isinstance(data, Mapping):
        raise RuleError(f"{where!r} must be a mapping with 'name' (and 'arguments', 'id'), not {_shown(data)}", where)
    _no_unknown(data, _CALL_FIELDS, where + ".")
    name = _get(data, "name", _is_str, "a string", where + ".")
    if not name:
        raise RuleError(f"field '{where}.name' is required: the function to call", f"{where}.name")
    args = _get(data, "arguments", lambda v: isinstance(v, Mapping | str), "a mapping or JSON text", where + ".")
    field_name = f"{where}.arguments"
    if isinstance(args, Mapping):
        try:  # compact, like the arguments models send
            args = json.dumps(args, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:  # YAML dates and the like, which JSON has not
            raise RuleError(f"field {field_name!r} cannot be JSON ({exc}; quote such values)", field_name) from None
    elif args is not None:
        try:
            parsed = json.loads(args)
        except ValueError as exc:
            raise RuleError(f"field {field_name!r} is not valid JSON: {exc}", field_name) from None
        if not isinstance(parsed, dict):
            raise RuleError(f"field {field_name!r} must be a JSON object, not {_shown(parsed)}", field_name)
    return ForcedCall(name, args, _get(data, "id", _is_str, "a string", where + "."))


def _answer_json(answer: Answer) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if answer.refusal is not None:
        out["refusal"] = answer.refusal
    elif answer.tool_calls:
        out["tool_calls"] = [
            {"name": c.name}
            | ({"arguments": json.loads(c.arguments)} if c.arguments is not None else {})
            | ({"id": c.id} if c.id is not None else {})
            for c in answer.tool_calls
        ]
    else:
        out["text"] = answer.text
    if answer.finish_reason is not None:
        out["finish_reason"] = answer.finish_reason
    return out


def _no_unknown(data: Mapping[Any, Any], known: frozenset[str], prefix: str) -> None:
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        guess = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f"did you mean {guess[0]!r}? " if guess else ""
        name = prefix + unknown[0]
        raise RuleError(f"unknown field {name!r} ({hint}known: {', '.join(sorted(known))})", name)


def _get(data: Mapping[str, Any], name: str, ok: Callable[[Any], bool], what: str, prefix: str = "") -> Any:
    """``data[name]`` (None when absent), checked by ``ok``."""
    value = data.get(name)
    if value is not None and not ok(value):
        raise RuleError(f"field {prefix + name!r} must be {what}, not {_shown(value)}", prefix + name)
    return value


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _non_empty_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value)


def _call_numbers(value: Any) -> bool:
    numbers = [value] if _is_int(value) else value if isinstance(value, list) and value else [0]
    return all(_is_int(n) and n >= 1 for n in numbers)


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"
